// The only file that includes sentencepiece_processor.h; it must include no Abseil header.
#include "models/sentencepiece_backend.h"

#include <sentencepiece_processor.h>

#include <exception>
#include <utility>

namespace tandem::models {
namespace {

// The header aliases its absl::string_view to std::string_view.
std::string_view View(std::string_view s) { return s; }

}  // namespace

struct SentencePieceBackend::Impl {
  sentencepiece::SentencePieceProcessor sp;
  bool strips_leading_space = true;
};

SentencePieceBackend::SentencePieceBackend(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
SentencePieceBackend::~SentencePieceBackend() = default;

std::unique_ptr<SentencePieceBackend> SentencePieceBackend::Load(std::string_view serialized_model,
                                                                 std::string* error) {
  auto impl = std::make_unique<Impl>();
  try {
    const auto status = impl->sp.LoadFromSerializedProto(View(serialized_model));
    if (!status.ok()) {
      *error = status.ToString();
      return nullptr;
    }
    if (impl->sp.GetPieceSize() <= 0) {
      *error = "SentencePiece model has no pieces";
      return nullptr;
    }
    // The model's normalizer spec is not exposed by the installed header, so probe it: with a
    // dummy prefix, the piece "▁" alone decodes to nothing.
    const int space = impl->sp.PieceToId(View("\xE2\x96\x81"));
    if (space >= 0 && !impl->sp.IsUnknown(space) && !impl->sp.IsControl(space)) {
      std::string text;
      if (impl->sp.Decode(std::vector<int>{space}, &text).ok()) {
        impl->strips_leading_space = text.empty();
      }
    }
  } catch (const std::exception& e) {
    *error = e.what();
    return nullptr;
  }
  return std::unique_ptr<SentencePieceBackend>(new SentencePieceBackend(std::move(impl)));
}

bool SentencePieceBackend::Encode(std::string_view text, std::vector<int32_t>* ids,
                                  std::string* error) const {
  std::vector<int> out;
  const auto status = impl_->sp.Encode(View(text), &out);
  if (!status.ok()) {
    *error = status.ToString();
    return false;
  }
  ids->assign(out.begin(), out.end());
  return true;
}

bool SentencePieceBackend::Decode(const std::vector<int32_t>& ids, std::string* text,
                                  std::string* error) const {
  const std::vector<int> in(ids.begin(), ids.end());
  const auto status = impl_->sp.Decode(in, text);
  if (!status.ok()) {
    *error = status.ToString();
    return false;
  }
  return true;
}

int32_t SentencePieceBackend::piece_size() const { return impl_->sp.GetPieceSize(); }
std::string SentencePieceBackend::IdToPiece(int32_t id) const { return impl_->sp.IdToPiece(id); }
int32_t SentencePieceBackend::PieceToId(std::string_view piece) const {
  return impl_->sp.PieceToId(View(piece));
}
bool SentencePieceBackend::IsControl(int32_t id) const { return impl_->sp.IsControl(id); }
bool SentencePieceBackend::IsUnknown(int32_t id) const { return impl_->sp.IsUnknown(id); }
bool SentencePieceBackend::IsUnused(int32_t id) const { return impl_->sp.IsUnused(id); }
bool SentencePieceBackend::IsByte(int32_t id) const { return impl_->sp.IsByte(id); }
int32_t SentencePieceBackend::bos_id() const { return impl_->sp.bos_id(); }
int32_t SentencePieceBackend::eos_id() const { return impl_->sp.eos_id(); }
int32_t SentencePieceBackend::pad_id() const { return impl_->sp.pad_id(); }
int32_t SentencePieceBackend::unk_id() const { return impl_->sp.unk_id(); }
bool SentencePieceBackend::strips_leading_space() const { return impl_->strips_leading_space; }

}  // namespace tandem::models
