#include "models/sentencepiece_model_proto.h"

namespace tandem::models {
namespace {

// ModelProto: `repeated SentencePiece pieces = 1;`. SentencePiece: `string piece = 1;
// float score = 2; Type type = 3;`.
constexpr uint32_t kPiecesField = 1;
constexpr uint32_t kPieceField = 1;
constexpr uint32_t kTypeField = 3;
constexpr uint32_t kVarint = 0, kFixed64 = 1, kLengthDelimited = 2, kFixed32 = 5;

class Reader {
 public:
  explicit Reader(std::string_view data) : data_(data) {}
  bool done() const { return pos_ >= data_.size(); }
  size_t pos() const { return pos_; }

  bool Varint(uint64_t* out) {
    uint64_t v = 0;
    for (int shift = 0; shift < 64; shift += 7) {
      if (pos_ >= data_.size()) return false;
      const uint8_t b = static_cast<uint8_t>(data_[pos_++]);
      v |= static_cast<uint64_t>(b & 0x7F) << shift;
      if ((b & 0x80) == 0) {
        *out = v;
        return true;
      }
    }
    return false;
  }

  // One field: its number, wire type and (for length-delimited fields) its payload.
  bool Field(uint32_t* number, uint32_t* wire, std::string_view* payload, uint64_t* varint) {
    uint64_t tag;
    if (!Varint(&tag)) return false;
    *number = static_cast<uint32_t>(tag >> 3);
    *wire = static_cast<uint32_t>(tag & 7);
    switch (*wire) {
      case kVarint:
        return Varint(varint);
      case kFixed64:
        return Skip(8);
      case kFixed32:
        return Skip(4);
      case kLengthDelimited: {
        uint64_t len;
        if (!Varint(&len) || len > data_.size() - pos_) return false;
        *payload = data_.substr(pos_, len);
        pos_ += len;
        return true;
      }
      default:
        return false;
    }
  }

 private:
  bool Skip(size_t n) {
    if (n > data_.size() - pos_) return false;
    pos_ += n;
    return true;
  }
  std::string_view data_;
  size_t pos_ = 0;
};

void PutVarint(uint64_t v, std::string* out) {
  while (v >= 0x80) {
    out->push_back(static_cast<char>((v & 0x7F) | 0x80));
    v >>= 7;
  }
  out->push_back(static_cast<char>(v));
}

void PutBytes(uint32_t number, std::string_view bytes, std::string* out) {
  PutVarint((static_cast<uint64_t>(number) << 3) | kLengthDelimited, out);
  PutVarint(bytes.size(), out);
  out->append(bytes.data(), bytes.size());
}

std::optional<SpPiece> ParsePiece(std::string_view message) {
  Reader r(message);
  SpPiece p;
  while (!r.done()) {
    uint32_t number, wire;
    std::string_view payload;
    uint64_t varint = 0;
    if (!r.Field(&number, &wire, &payload, &varint)) return std::nullopt;
    if (number == kPieceField && wire == kLengthDelimited) p.piece = std::string(payload);
    if (number == kTypeField && wire == kVarint) p.type = static_cast<SpPieceType>(varint);
  }
  return p;
}

}  // namespace

std::optional<std::vector<SpPiece>> ReadSpPieces(std::string_view model) {
  Reader r(model);
  std::vector<SpPiece> pieces;
  while (!r.done()) {
    uint32_t number, wire;
    std::string_view payload;
    uint64_t varint;
    if (!r.Field(&number, &wire, &payload, &varint)) return std::nullopt;
    if (number != kPiecesField || wire != kLengthDelimited) continue;
    std::optional<SpPiece> p = ParsePiece(payload);
    if (!p) return std::nullopt;
    pieces.push_back(*std::move(p));
  }
  return pieces;
}

std::optional<std::string> RenameSpPieces(std::string_view model,
                                          const std::map<int32_t, std::string>& renames) {
  Reader r(model);
  std::string out;
  out.reserve(model.size() + 64);
  int32_t id = 0;
  while (!r.done()) {
    const size_t start = r.pos();
    uint32_t number, wire;
    std::string_view payload;
    uint64_t varint;
    if (!r.Field(&number, &wire, &payload, &varint)) return std::nullopt;
    const bool is_piece = number == kPiecesField && wire == kLengthDelimited;
    auto it = is_piece ? renames.find(id) : renames.end();
    if (is_piece) ++id;
    if (it == renames.end()) {
      out.append(model.data() + start, r.pos() - start);
      continue;
    }
    // Re-encode this SentencePiece with its `piece` field replaced and the rest kept.
    std::string message;
    PutBytes(kPieceField, it->second, &message);
    Reader fields(payload);
    while (!fields.done()) {
      const size_t field_start = fields.pos();
      uint32_t n, w;
      std::string_view p;
      uint64_t v;
      if (!fields.Field(&n, &w, &p, &v)) return std::nullopt;
      if (n == kPieceField && w == kLengthDelimited) continue;
      message.append(payload.data() + field_start, fields.pos() - field_start);
    }
    PutBytes(kPiecesField, message, &out);
  }
  return out;
}

}  // namespace tandem::models
