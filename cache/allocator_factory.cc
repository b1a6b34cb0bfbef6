#include "cache/allocator_factory.h"

#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "cache/avmp_allocator.h"
#include "cache/baseline_allocators.h"

namespace tandem::cache {
namespace {

absl::StatusOr<double> ParseRatio(absl::string_view name, absl::string_view text) {
  double r = 0;
  if (!absl::SimpleAtod(text, &r) || !(r >= 0) || r > 1e6) {
    return absl::InvalidArgumentError(
        absl::StrCat("allocator '", name, "': ratio '", text, "' is not a number >= 0"));
  }
  return r;
}

}  // namespace

absl::StatusOr<NamedAllocator> CreateAllocator(const std::string& name, const ModelSpec& spec,
                                               const AllocatorOptions& options) {
  if (absl::Status s = spec.Validate(); !s.ok()) return s;
  if (options.page_tokens == 0) return absl::InvalidArgumentError("page_tokens must be positive");
  const size_t kv_page = options.kv_page_bytes != 0
                             ? options.kv_page_bytes
                             : spec.kv_bytes_per_token() * options.page_tokens;
  const size_t ssm_block =
      options.ssm_block_bytes != 0 ? options.ssm_block_bytes : spec.ssm_state_bytes();
  NamedAllocator out;
  out.name = name;
  out.kv_page_tokens = options.page_tokens;
  absl::string_view rest = name;
  if (options.make_backing && (name == "padded-unified" || name.rfind("fixed-dual:", 0) == 0)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "allocator '", name,
        "' keeps its memory on the host; on a device use avmp-static:R (the same fixed split) or "
        "avmp-dynamic[:R]"));
  }
  if (name == "padded-unified") {
    auto a = PaddedUnifiedAllocator::Create({.kv_page_bytes = kv_page,
                                             .ssm_block_bytes = ssm_block,
                                             .budget_bytes = options.budget_bytes,
                                             .backing = options.backing});
    if (!a.ok()) return a.status();
    out.kv_page_tokens = options.page_tokens * (*a)->kv_pages_per_slot();
    out.allocator = *std::move(a);
    return out;
  }
  if (absl::ConsumePrefix(&rest, "fixed-dual:")) {
    auto r = ParseRatio(name, rest);
    if (!r.ok()) return r.status();
    auto a = FixedDualAllocator::Create({.kv_page_bytes = kv_page,
                                         .ssm_block_bytes = ssm_block,
                                         .budget_bytes = options.budget_bytes,
                                         .mamba_full_memory_ratio = *r,
                                         .backing = options.backing});
    if (!a.ok()) return a.status();
    out.allocator = *std::move(a);
    return out;
  }
  bool dynamic = false;
  bool demand_aware = true;
  double r = 1.0;
  if (absl::ConsumePrefix(&rest, "avmp-static:")) {
    auto parsed = ParseRatio(name, rest);
    if (!parsed.ok()) return parsed.status();
    r = *parsed;
  } else if (name == "avmp-dynamic" || name == "avmp-dynamic-paper") {
    dynamic = true;
    demand_aware = name == "avmp-dynamic";
  } else if (absl::ConsumePrefix(&rest, "avmp-dynamic-paper:")) {
    auto parsed = ParseRatio(name, rest);
    if (!parsed.ok()) return parsed.status();
    r = *parsed;
    dynamic = true;
    demand_aware = false;
  } else if (absl::ConsumePrefix(&rest, "avmp-dynamic:")) {
    auto parsed = ParseRatio(name, rest);
    if (!parsed.ok()) return parsed.status();
    r = *parsed;
    dynamic = true;
  } else {
    return absl::InvalidArgumentError(
        absl::StrCat("unknown allocator '", name,
                     "' (expected padded-unified, fixed-dual:R, avmp-static:R, avmp-dynamic or "
                     "avmp-dynamic-paper)"));
  }
  std::unique_ptr<MemoryBacking> backing;
  if (options.make_backing) {
    absl::StatusOr<std::unique_ptr<MemoryBacking>> made =
        options.make_backing(options.budget_bytes);
    if (!made.ok()) return made.status();
    backing = *std::move(made);
  }
  auto a = AvmpAllocator::Create({.kv_page_bytes = kv_page,
                                  .ssm_block_bytes = ssm_block,
                                  .budget_bytes = options.budget_bytes,
                                  .initial_ssm_fraction = r / (1 + r),
                                  .dynamic = dynamic,
                                  .threshold_high = options.threshold_high,
                                  .migration_batch_size = options.migration_batch_size,
                                  .min_rebalance_interval_ops = options.min_rebalance_interval_ops,
                                  .backing = options.backing,
                                  .demand_aware = demand_aware},
                                 std::move(backing));
  if (!a.ok()) return a.status();
  out.allocator = *std::move(a);
  return out;
}

}  // namespace tandem::cache
