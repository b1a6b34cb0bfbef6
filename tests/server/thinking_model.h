// A reasoning model for tests: the fixture model zamba2-tiny (its files linked, not copied) with a
// chat template that opens a <think> block at the end of the prompt, as the templates of
// reasoning models do (Qwen3, Nemotron), unless `enable_thinking` is false, when it writes the
// block empty and closed; a past answer's reasoning_content is written in its own block. The
// server detects the "think" reasoning format from it.
#ifndef TANDEM_TESTS_SERVER_THINKING_MODEL_H_
#define TANDEM_TESTS_SERVER_THINKING_MODEL_H_

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "nlohmann/json.hpp"

namespace tandem::testing {

inline constexpr char kThinkingTemplate[] =
    "{{ bos_token }}{% for message in messages %}{{ '<|im_start|>' + message['role'] + '\\n' }}"
    "{% if message['role'] == 'assistant' and message['reasoning_content'] %}"
    "{{ '<think>\\n' + message['reasoning_content'] + '\\n</think>\\n\\n' }}{% endif %}"
    "{{ message['content'] + '<|im_end|>\\n' }}{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}"
    "{% if enable_thinking is defined and not enable_thinking %}"
    "{{ '<think>\\n\\n</think>\\n\\n' }}{% else %}{{ '<think>\\n' }}{% endif %}{% endif %}";

// The model directory, made under `parent` and removed with the object.
class ThinkingModel {
 public:
  explicit ThinkingModel(const std::string& parent)
      : dir_(std::filesystem::path(parent) / ("thinking_model_" + std::to_string(::getpid()))) {
    namespace fs = std::filesystem;
    const fs::path source = fs::path(TANDEM_TEST_DATA) / "models" / "zamba2-tiny";
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    for (const fs::directory_entry& entry : fs::directory_iterator(source)) {
      if (entry.path().filename() == "tokenizer_config.json") continue;
      fs::create_symlink(fs::absolute(entry.path()), dir_ / entry.path().filename());
    }
    std::ifstream in(source / "tokenizer_config.json");
    nlohmann::json config = nlohmann::json::parse(in);
    config["chat_template"] = kThinkingTemplate;
    std::ofstream(dir_ / "tokenizer_config.json") << config.dump();
  }
  ~ThinkingModel() { std::filesystem::remove_all(dir_); }
  ThinkingModel(const ThinkingModel&) = delete;
  ThinkingModel& operator=(const ThinkingModel&) = delete;

  std::string dir() const { return dir_.string(); }

 private:
  std::filesystem::path dir_;
};

}  // namespace tandem::testing

#endif  // TANDEM_TESTS_SERVER_THINKING_MODEL_H_
