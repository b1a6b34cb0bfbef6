#include "server/cli/bundled_model.h"

#include <filesystem>
#include <system_error>
#include <vector>

namespace tandem::cli {

absl::StatusOr<std::string> BundledModelDir() {
  constexpr const char* kName = "tandem-tiny-chat";
  std::vector<std::filesystem::path> candidates;
  std::error_code error;
  const std::filesystem::path exe = std::filesystem::read_symlink("/proc/self/exe", error);
  if (!error) {
    candidates.push_back(exe.parent_path() / "../../bundled" / kName);
    candidates.push_back(exe.parent_path() / "../share/tandem" / kName);
  }
  candidates.push_back(std::filesystem::path("bundled") / kName);
  for (const std::filesystem::path& dir : candidates) {
    if (std::filesystem::exists(dir / "config.json", error)) {
      return std::filesystem::weakly_canonical(dir, error).string();
    }
  }
  return absl::NotFoundError(
      "no --model given and the bundled model (bundled/tandem-tiny-chat) was not found beside "
      "the binary or in the working directory");
}

}  // namespace tandem::cli
