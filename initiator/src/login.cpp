// The initiator's login state machine (RFC 7143 §6.3 login phase, §11.12–§11.13, §13 keys).
#include "login.hpp"

#include "iserkit/common/errors.hpp"
#include "iserkit/initiator/discovery.hpp"
#include "iserkit/initiator/errors.hpp"

namespace iserkit::initiator {

iscsi::NegotiationPolicy initiator_policy(const SessionOptions& o, bool discovery, bool rdma) {
  iscsi::NegotiationPolicy p;
  auto& w = p.wanted;
  w.initiator_max_recv_data_segment_length = o.max_recv_data_segment_length;
  w.max_burst_length = o.max_burst_length;
  w.first_burst_length = std::min(o.first_burst_length, o.max_burst_length);
  w.max_outstanding_r2t = o.max_outstanding_r2t;
  w.immediate_data = o.immediate_data;
  w.initial_r2t = o.initial_r2t;
  w.error_recovery_level = 0;
  w.max_connections = 1;
  w.data_pdu_in_order = true;
  w.data_sequence_in_order = true;
  w.default_time2wait = 2;
  w.default_time2retain = 0;  // ErrorRecoveryLevel 0: nothing to retain
  w.session_type = discovery ? "Discovery" : "Normal";
  if (o.header_digest == Digest::crc32c) p.header_digests = {"CRC32C", "None"};
  if (o.data_digest == Digest::crc32c) p.data_digests = {"CRC32C", "None"};
  if (rdma) {
    w.rdma_extensions = true;
    w.initiator_recv_data_segment_length = o.iser_recv_data_segment_length;
    // LIO proposes TargetRecvDataSegmentLength and waits for an answer before it transits.
    p.answer_rdma_lengths = true;
    // Immediate data would be copied into a send descriptor, unsolicited Data-Out needs the
    // target's receive buffers: with neither, the target RDMA-reads all write data in place.
    w.immediate_data = false;
    w.initial_r2t = true;
    p.header_digests = {"None"};
    p.data_digests = {"None"};
  }
  return p;
}

LoginMachine::LoginMachine(LoginConfig config)
    : config_(std::move(config)),
      negotiation_(iscsi::Role::initiator, initiator_policy(config_.options, config_.discovery, config_.rdma)) {
  stage_ = config_.options.security_stage ? iscsi::LoginStage::security_negotiation
                                          : iscsi::LoginStage::operational_negotiation;
}

iscsi::TextPairs LoginMachine::operational_offers() {
  offered_operational_ = true;
  if (config_.rdma) {
    // RFC 7145 §6: RDMAExtensions and the iSER receive length replace digests and
    // MaxRecvDataSegmentLength (as LIO's isert and open-iscsi do).
    if (config_.discovery) return negotiation_.offer({"RDMAExtensions", "InitiatorRecvDataSegmentLength"});
    // TargetRecvDataSegmentLength too, at the RFC default, as open-iscsi and FreeBSD's iscsid do:
    // LIO proposes it itself otherwise and withholds transit for a round until it is answered.
    return negotiation_.offer({"RDMAExtensions", "InitiatorRecvDataSegmentLength", "TargetRecvDataSegmentLength",
                               "MaxConnections", "InitialR2T",
                               "ImmediateData", "MaxBurstLength", "FirstBurstLength", "DefaultTime2Wait",
                               "DefaultTime2Retain", "MaxOutstandingR2T", "DataPDUInOrder", "DataSequenceInOrder",
                               "ErrorRecoveryLevel"});
  }
  if (config_.discovery) {
    // Discovery sessions negotiate only what the text exchange needs (RFC 7143 §13: most keys are
    // irrelevant there).
    return negotiation_.offer({"HeaderDigest", "DataDigest", "MaxRecvDataSegmentLength"});
  }
  return negotiation_.offer({"HeaderDigest", "DataDigest", "MaxConnections", "InitialR2T", "ImmediateData",
                             "MaxRecvDataSegmentLength", "MaxBurstLength", "FirstBurstLength",
                             "DefaultTime2Wait", "DefaultTime2Retain", "MaxOutstandingR2T", "DataPDUInOrder",
                             "DataSequenceInOrder", "ErrorRecoveryLevel"});
}

LoginSend LoginMachine::request(iscsi::LoginStage csg, iscsi::TextPairs text, bool transit) {
  iscsi::LoginRequest r;
  r.transit = transit;
  r.csg = csg;
  // RFC 7143 §11.12.3: NSG is meaningful only with T=1; from security we go to operational, from
  // operational to full feature phase.
  r.nsg = transit ? (csg == iscsi::LoginStage::security_negotiation ? iscsi::LoginStage::operational_negotiation
                                                                   : iscsi::LoginStage::full_feature_phase)
                  : csg;
  r.isid = config_.isid;
  r.tsih = tsih_;
  r.itt = config_.itt;
  r.cid = config_.cid;
  // RFC 7143 §11.12.8: every Login Request of the leading login carries the initial CmdSN.
  r.cmd_sn = config_.cmd_sn;
  r.exp_stat_sn = exp_stat_sn_;
  return {r, std::move(text)};
}

LoginSend LoginMachine::start() {
  iscsi::TextPairs text;
  // RFC 7143 §13.6/§13.4/§13.21: InitiatorName and SessionType in the first request; TargetName
  // for a Normal session.
  text.push_back({"InitiatorName", config_.initiator_name});
  if (!config_.initiator_alias.empty()) text.push_back({"InitiatorAlias", config_.initiator_alias});
  text.push_back({"SessionType", config_.discovery ? "Discovery" : "Normal"});
  if (!config_.discovery) text.push_back({"TargetName", config_.target_name});
  if (stage_ == iscsi::LoginStage::security_negotiation) {
    const auto& chap = config_.options.chap;
    // RFC 7143 §12.1.3: with credentials we offer CHAP; None too unless we insist on mutual
    // authentication (a target answering None would then go unauthenticated).
    text.push_back({"AuthMethod", !chap.enabled() ? "None" : chap.mutual() ? "CHAP" : "CHAP,None"});
    return request(stage_, std::move(text), true);
  }
  for (auto& p : operational_offers()) text.push_back(std::move(p));
  return request(stage_, std::move(text), true);
}

Result<LoginStep> LoginMachine::on_response(const iscsi::LoginResponse& rsp, const iscsi::TextPairs& text) {
  if (rsp.status_class == 1) {
    // RFC 7143 §11.13.5: class 1 redirects; the response carries TargetAddress (§13.8).
    const std::string* address = iscsi::find_value(text, "TargetAddress");
    if (address == nullptr) return fail(make_login_error(rsp.status_class, rsp.status_detail));
    auto portal = parse_target_address(*address);
    if (!portal) return fail(make_login_error(rsp.status_class, rsp.status_detail));
    return LoginStep{LoginRedirect{portal->host, portal->port, rsp.status_detail == 0x02}};
  }
  // RFC 7143 §11.13.5: a non-zero status class ends the login.
  if (rsp.status_class != 0) return fail(make_login_error(rsp.status_class, rsp.status_detail));
  // RFC 7143 §11.13: the response echoes ITT and ISID.
  if (rsp.itt != config_.itt || rsp.isid != config_.isid) return fail(errc::protocol_error);
  // RFC 7143 §11.13.4: the response's CSG is the request's.
  if (rsp.csg != stage_) return fail(errc::protocol_error);
  exp_stat_sn_ = rsp.stat_sn + 1;
  have_stat_sn_ = true;
  if (rsp.tsih != 0) tsih_ = rsp.tsih;

  pending_text_.insert(pending_text_.end(), text.begin(), text.end());
  if (rsp.continue_) {
    // RFC 7143 §11.13.3: C=1 — more text follows; answer with an empty request (T=0).
    if (rsp.transit) return fail(errc::protocol_error);  // T and C must not both be set
    return LoginStep{request(stage_, {}, false)};
  }
  iscsi::TextPairs incoming = std::move(pending_text_);
  pending_text_.clear();

  if (stage_ == iscsi::LoginStage::security_negotiation) return security_response(rsp, incoming);

  iscsi::TextPairs answers;
  auto r = negotiation_.receive(incoming);
  if (!r) return fail(r.error());
  answers = std::move(*r);
  if (!offered_operational_) {
    auto offers = operational_offers();
    answers.insert(answers.end(), offers.begin(), offers.end());
  }
  if (rsp.transit) {
    if (rsp.nsg != iscsi::LoginStage::full_feature_phase) return fail(errc::protocol_error);
    // RFC 7143 §6.2: the target may not transit while it still has answers of ours pending; keys
    // it never answered keep their defaults (finish()).
    negotiation_.finish();
    // RFC 7145 §5.1: on an RDMA connection the target must agree to the iSER extensions
    // (open-iscsi aborts the login too). A discovery session moves no SCSI data, so the
    // extensions do not matter there: tgtd, for one, leaves RDMAExtensions unanswered in
    // discovery sessions while the text exchange runs over iSER framing all the same.
    if (config_.rdma && !config_.discovery && !negotiation_.parameters().rdma_extensions)
      return fail(errc::negotiation_failed);
    LoginDone done;
    done.parameters = negotiation_.parameters();
    done.tsih = tsih_;
    done.exp_stat_sn = exp_stat_sn_;
    done.exp_cmd_sn = rsp.exp_cmd_sn;
    done.max_cmd_sn = rsp.max_cmd_sn;
    if (done.tsih == 0) return fail(errc::protocol_error);  // RFC 7143 §11.13.6: final response has TSIH
    return LoginStep{std::move(done)};
  }
  return LoginStep{request(stage_, std::move(answers), true)};
}

Result<LoginStep> LoginMachine::security_response(const iscsi::LoginResponse& rsp, const iscsi::TextPairs& incoming) {
  const auto& chap = config_.options.chap;
  iscsi::TextPairs chap_keys;
  for (const auto& [key, value] : incoming) {
    if (key == "AuthMethod") {
      if (auth_ != Auth::offered) return fail(errc::negotiation_failed);  // answered twice
      if (value == "None") {
        // We offered None only without mutual CHAP (start()); a target choosing it anyway would
        // go unauthenticated.
        if (chap.mutual()) return fail(errc::authentication_failed);
        auth_ = Auth::none;
      } else if (value == "CHAP" && chap.enabled()) {
        auth_ = Auth::chap;
        chap_.emplace(chap);
      } else {
        return fail(errc::negotiation_failed);  // not one we offered (RFC 7143 §6.2 list rule)
      }
    } else if (key == "TargetPortalGroupTag" || key == "TargetAlias") {
      (void)negotiation_.receive({{key, value}});
    } else if (key.starts_with("CHAP_")) {
      if (auth_ != Auth::chap) return fail(errc::negotiation_failed);
      chap_keys.push_back({key, value});
    }
  }
  iscsi::TextPairs answers;
  if (auth_ == Auth::chap) {
    if (chap_keys.empty() && !chap_->responded() && !rsp.transit) {
      answers = chap_->start();  // the round that chose CHAP: propose algorithms
    } else {
      auto r = chap_->on_keys(chap_keys);
      if (!r) return fail(r.error());
      answers = std::move(*r);
    }
  }
  if (rsp.transit) {
    // RFC 7143 §12.1.3: the target may leave the security stage only once it authenticated us and,
    // for mutual CHAP, proved itself; a target that asked for no authentication must have said so.
    if (chap.mutual() && !(auth_ == Auth::chap && chap_->done())) return fail(errc::authentication_failed);
    if (auth_ == Auth::chap && !chap_->done()) return fail(errc::authentication_failed);
    // RFC 7143 §11.13.3: with T=1 the target moves to NSG; it must be the one we asked for.
    if (rsp.nsg != iscsi::LoginStage::operational_negotiation) return fail(errc::protocol_error);
    stage_ = iscsi::LoginStage::operational_negotiation;
    return LoginStep{request(stage_, operational_offers(), true)};
  }
  // Ask to leave the stage once nothing of CHAP remains for us to send after this request.
  const bool transit = auth_ != Auth::chap || chap_->responded();
  return LoginStep{request(stage_, std::move(answers), transit)};
}

}  // namespace iserkit::initiator
