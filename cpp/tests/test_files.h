// Whole-file reads and writes and a temporary directory, for the C++ tests
// that damage checkpoint files on purpose.
#ifndef RESOUND_TESTS_TEST_FILES_H_
#define RESOUND_TESTS_TEST_FILES_H_

#include <stdlib.h>
#include <unistd.h>

#include <fstream>
#include <iterator>
#include <string>
#include <vector>

namespace resound::test_files {

inline std::vector<char> Contents(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

inline void Store(const std::string& path, const std::vector<char>& data) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(data.data(), static_cast<std::streamsize>(data.size()));
}

// A new directory under /tmp, removed (once the tests emptied it) at the end.
class TempDirectory {
 public:
  TempDirectory() {
    std::string pattern = "/tmp/resound-checkpoint-test-XXXXXX";
    if (::mkdtemp(pattern.data()) == nullptr) std::abort();
    path_ = pattern;
  }
  ~TempDirectory() { ::rmdir(path_.c_str()); }
  TempDirectory(const TempDirectory&) = delete;
  TempDirectory& operator=(const TempDirectory&) = delete;
  const std::string& path() const noexcept { return path_; }

 private:
  std::string path_;
};

}  // namespace resound::test_files

#endif  // RESOUND_TESTS_TEST_FILES_H_
