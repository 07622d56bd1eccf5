// The replay driver: runs a fuzz target's LLVMFuzzerTestOneInput on files (or every file of the
// folders) named on the command line, once each, without libFuzzer. Built by every compiler, so the
// normal and sanitizer builds run the committed corpora (seeds and regression inputs) as a ctest,
// the way libnbd's AFL wrapper reads a file. Exit 0 when every input ran; a failed invariant aborts.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size);

namespace {

void run_file(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::vector<char> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  // A fresh heap copy of exactly the input's size, so ASan sees reads past its end.
  std::vector<std::uint8_t> copy(bytes.begin(), bytes.end());
  static std::uint8_t none = 0;  // libFuzzer never passes a null pointer either
  LLVMFuzzerTestOneInput(copy.empty() ? &none : copy.data(), copy.size());
}

}  // namespace

int main(int argc, char** argv) {
  std::size_t count = 0;
  for (int i = 1; i < argc; ++i) {
    const std::filesystem::path p(argv[i]);
    if (std::filesystem::is_directory(p)) {
      std::vector<std::filesystem::path> files;
      for (const auto& e : std::filesystem::recursive_directory_iterator(p))
        if (e.is_regular_file()) files.push_back(e.path());
      std::sort(files.begin(), files.end());
      for (const auto& f : files) {
        run_file(f);
        ++count;
      }
    } else {
      run_file(p);
      ++count;
    }
  }
  std::printf("replayed %zu inputs\n", count);
  return count == 0 ? 1 : 0;
}
