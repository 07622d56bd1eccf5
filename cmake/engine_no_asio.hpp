// Force-included (-include) into every source of the sans-I/O engine libraries
// (iserkit::initiator_engine, iserkit::target_engine): the identifier `asio` is poisoned, so any
// Boost.Asio header reached through their include graph (every one names namespace boost::asio)
// stops the build. The engines see the transport only through transport-neutral values
// (iserkit/datamover/pdu_io.hpp, capabilities.hpp); docs/architecture.md, "The transport seam".
#pragma once
#pragma GCC poison asio
