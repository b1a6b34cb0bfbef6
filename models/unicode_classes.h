// The Unicode classes the byte-level tokenizers' split patterns use, exactly as the `tokenizers`
// library's regex engine defines them (table generated from it: unicode_classes_table.inc).
#ifndef TANDEM_MODELS_UNICODE_CLASSES_H_
#define TANDEM_MODELS_UNICODE_CLASSES_H_

namespace tandem::models {

// \p{L}: a letter (general categories Lu, Ll, Lt, Lm, Lo).
bool IsUnicodeLetter(char32_t cp);
// \p{N}: a number (Nd, Nl, No).
bool IsUnicodeNumber(char32_t cp);

}  // namespace tandem::models

#endif  // TANDEM_MODELS_UNICODE_CLASSES_H_
