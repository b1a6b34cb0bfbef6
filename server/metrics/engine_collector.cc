#include "server/metrics/engine_collector.h"

#include <string>
#include <utility>

#include "cache/block_allocator.h"

namespace tandem::server {
namespace {

// Builds the families of one scrape; each Add* appends one family with one or more samples.
class Families {
 public:
  void Counter(const std::string& name, const std::string& help, double value) {
    Family(name, help, prometheus::MetricType::Counter).metric.push_back(Sample({}, value, true));
  }
  void Gauge(const std::string& name, const std::string& help, double value) {
    Family(name, help, prometheus::MetricType::Gauge).metric.push_back(Sample({}, value, false));
  }
  // One sample per pool, labelled pool="kv" / pool="ssm".
  template <typename ValueOf>
  void PerPool(const std::string& name, const std::string& help, prometheus::MetricType type,
               const cache::AllocatorStats& memory, ValueOf value_of) {
    prometheus::MetricFamily& family = Family(name, help, type);
    for (int p = 0; p < cache::kNumPools; ++p) {
      family.metric.push_back(Sample({{"pool", cache::PoolName(static_cast<cache::Pool>(p))}},
                                     static_cast<double>(value_of(memory.pools[p])),
                                     type == prometheus::MetricType::Counter));
    }
  }
  std::vector<prometheus::MetricFamily> Take() { return std::move(families_); }

 private:
  prometheus::MetricFamily& Family(const std::string& name, const std::string& help,
                                   prometheus::MetricType type) {
    families_.push_back({name, help, type, {}});
    return families_.back();
  }
  static prometheus::ClientMetric Sample(std::vector<prometheus::ClientMetric::Label> labels,
                                         double value, bool counter) {
    prometheus::ClientMetric m;
    m.label = std::move(labels);
    if (counter) {
      m.counter.value = value;
    } else {
      m.gauge.value = value;
    }
    return m;
  }

  std::vector<prometheus::MetricFamily> families_;
};

}  // namespace

std::vector<prometheus::MetricFamily> EngineCollector::Collect() const {
  const EngineSnapshot snap = snapshot_();
  const engine::SchedulerStats& s = snap.stats;
  const cache::AllocatorStats& m = s.memory;
  Families f;
  using prometheus::MetricType;

  // Tokens and requests.
  f.Counter("tandem_prompt_tokens_total", "Prompt tokens of admitted requests.",
            static_cast<double>(s.prompt_tokens));
  f.Counter("tandem_cached_tokens_total",
            "Prompt tokens restored from the prefix cache instead of prefilled.",
            static_cast<double>(s.cached_tokens));
  f.Counter("tandem_generation_tokens_total", "Output tokens sampled.",
            static_cast<double>(s.generated_tokens));
  f.Counter("tandem_prefill_tokens_total",
            "Tokens run through prefill, recomputation after preemption included.",
            static_cast<double>(s.prefill_tokens));
  f.Counter("tandem_draft_tokens_total",
            "Speculative decoding: drafted tokens verified by the model.",
            static_cast<double>(s.draft_tokens));
  f.Counter("tandem_draft_tokens_accepted_total",
            "Speculative decoding: drafted tokens the model confirmed, emitted without a pass of "
            "their own.",
            static_cast<double>(s.accepted_draft_tokens));
  f.Counter("tandem_hydragen_nodes_total",
            "Shared-prefix nodes attended once for all the decode rows sharing them (Hydragen), "
            "counted per attention layer.",
            static_cast<double>(s.hydragen_nodes));
  f.Counter("tandem_preemptions_total",
            "Sequences evicted from the batch for memory and resumed later.",
            static_cast<double>(s.preemptions));
  f.Counter("tandem_engine_steps_total", "Engine steps: forward passes over the batch.",
            static_cast<double>(s.steps));
  f.Counter("tandem_gpu_graph_replays_total",
            "Steps whose forward pass the GPU replayed from a CUDA graph (--gpu-graphs).",
            static_cast<double>(s.graph_replays));
  f.Counter("tandem_gpu_graph_captures_total",
            "Forward passes captured into a CUDA graph (--gpu-graphs).",
            static_cast<double>(s.graph_captures));
  f.Gauge("tandem_requests_running", "Requests in the engine's batch.",
          static_cast<double>(s.running));
  f.Gauge("tandem_requests_waiting", "Requests queued for admission to the batch.",
          static_cast<double>(s.waiting));
  f.Gauge("tandem_streams_active", "Open Generate and Chat calls.",
          static_cast<double>(snap.active_streams));
  f.Gauge("tandem_draining", "1 while the server drains for shutdown, else 0.",
          snap.draining ? 1.0 : 0.0);

  // The prefix cache.
  f.Gauge("tandem_token_hit_rate",
          "Cached prompt tokens over prompt tokens since start (for a window, use "
          "rate(tandem_cached_tokens_total) / rate(tandem_prompt_tokens_total)).",
          s.token_hit_rate());
  f.Gauge("tandem_cache_alpha", "The FLOP-efficiency weight α of Marconi's eviction utility.",
          s.alpha);
  f.Counter("tandem_alpha_tunings_total", "Times the online grid search adopted a new α.",
            static_cast<double>(s.alpha_tunings));
  f.Counter("tandem_cache_evictions_total", "Prefix cache nodes evicted.",
            static_cast<double>(s.cache.evictions));
  f.Counter("tandem_cache_hits_without_checkpoint_total",
            "Requests whose prompt matched the cache beyond its deepest SSM checkpoint.",
            static_cast<double>(s.hit_without_checkpoint));
  f.Gauge("tandem_cache_nodes", "Nodes of the prefix cache's radix tree.",
          static_cast<double>(s.cache.nodes));
  f.Gauge("tandem_cache_bytes", "Bytes of KV pages and SSM checkpoints held by the prefix cache.",
          static_cast<double>(s.cache.bytes));
  f.Gauge("tandem_cache_pinned_prefixes", "Prefixes pinned in the prefix cache (PinPrefix).",
          static_cast<double>(s.cache.pinned_prefixes));
  f.Gauge("tandem_cache_pinned_bytes",
          "Bytes of the prefix cache held by pinned prefixes, which eviction never takes.",
          static_cast<double>(s.cache.pinned_bytes));
  f.Counter("tandem_cache_hinted_checkpoints_total",
            "SSM states saved where a request said later ones will branch (a chat's message "
            "boundaries) and the cache had none.",
            static_cast<double>(s.cache.hinted_positions));
  f.Counter("tandem_cache_insert_errors_total",
            "Finished or preempted sequences whose state the prefix cache refused.",
            static_cast<double>(s.cache_insert_errors));

  // Memory: the two pools and the migrations between them.
  f.PerPool("tandem_pool_used_bytes", "Bytes of a pool's units in use.", MetricType::Gauge, m,
            [](const cache::PoolStats& p) { return p.used_units * p.unit_bytes; });
  f.PerPool("tandem_pool_capacity_bytes", "Bytes a pool can hold now (it moves under AVMP).",
            MetricType::Gauge, m,
            [](const cache::PoolStats& p) { return p.capacity_units * p.unit_bytes; });
  f.PerPool("tandem_oom_events_total", "Allocations a pool refused for lack of memory.",
            MetricType::Counter, m, [](const cache::PoolStats& p) { return p.oom_events; });
  f.Gauge("tandem_memory_usage_ratio",
          "Fraction of the pools' capacity held by sequences; the prefix cache's evictable "
          "pages count as free (the KV utilisation a load balancer compares replicas by).",
          s.memory_usage_ratio());
  f.Gauge("tandem_memory_budget_bytes", "Memory given to KV pages and SSM blocks together.",
          static_cast<double>(m.budget_bytes));
  f.Counter("tandem_migrations_total", "Capacity moves between the KV and SSM pools (AVMP).",
            static_cast<double>(m.migrations));
  f.Counter("tandem_migrated_bytes_total", "Bytes of capacity moved between the pools.",
            static_cast<double>(m.bytes_migrated));
  f.Counter("tandem_memory_commit_failures_total",
            "Times the OS refused to back pool memory (each failed one allocation).",
            static_cast<double>(m.commit_failures));
  f.Counter("tandem_memory_decommit_failures_total",
            "Times the OS refused to release pool memory (it stays counted as committed).",
            static_cast<double>(m.decommit_failures));
  f.Counter("tandem_heap_trims_total",
            "Times freed heap memory was returned to the OS (after engine work, or after any "
            "burst such as a flood of calls).",
            static_cast<double>(snap.heap_trims));
  f.Counter("tandem_grammar_cache_hits_total",
            "Constrained requests (JSON Schema, forced tool calls) whose grammar was compiled "
            "already.",
            static_cast<double>(snap.grammar_hits));
  f.Counter("tandem_grammar_compiles_total",
            "Grammars compiled for constrained requests (refused schemas included).",
            static_cast<double>(snap.grammar_compiles));
  f.Gauge("tandem_grammar_cache_entries", "Compiled grammars kept.",
          static_cast<double>(snap.grammar_entries));
  f.Gauge("tandem_grammar_cache_bytes", "Bytes the kept grammars and their keys take.",
          static_cast<double>(snap.grammar_bytes));
  return f.Take();
}

}  // namespace tandem::server
