// Unicode Normalization Form C, as the `tokenizers` library's NFC normalizer computes it
// (GPT-NeoX's tokenizer.json applies it before its byte-level BPE). Its tables are read off that
// library (unicode_nfc_table.inc), whose Unicode data is older than the current standard: a
// mark added since is a starter here, as it is there.
#ifndef TANDEM_MODELS_UNICODE_NFC_H_
#define TANDEM_MODELS_UNICODE_NFC_H_

#include <string>
#include <string_view>
#include <vector>

#include "models/tokenizer.h"

namespace tandem::models {

// The NFC form of `text` (valid UTF-8). `align`, when given, holds on entry the input range of
// each byte of `text` and on return that of each byte of the result: a character made of
// several is traced to all of them.
std::string NfcNormalize(std::string_view text, std::vector<TextRange>* align = nullptr);

}  // namespace tandem::models

#endif  // TANDEM_MODELS_UNICODE_NFC_H_
