// The functions a chat template can call by name: jinja2's range/namespace/dict and the
// raise_exception/strftime_now that transformers adds.
#include <ctime>

#include "absl/strings/str_cat.h"
#include "server/chat_template/builtins.h"

namespace tandem::chat_template {

void AddGlobals(Dict& g) {
  g.Set("raise_exception",
        Value::MakeBuiltin("raise_exception",
                           [](Interpreter& in, CallArgs& a) -> absl::StatusOr<Value> {
                             std::string msg = a.positional.empty() ? "" : a.positional[0].Str();
                             return in.Error(absl::StrCat("raise_exception: ", msg));
                           }));
  g.Set(
      "strftime_now",
      Value::MakeBuiltin("strftime_now", [](Interpreter& in, CallArgs& a) -> absl::StatusOr<Value> {
        if (a.positional.size() != 1 || !a.positional[0].is_string()) {
          return in.Error("strftime_now() takes one format string");
        }
        const std::string& fmt = a.positional[0].as_string();
        if (fmt.size() > 256) return in.Error("strftime_now(): format too long");
        std::time_t now = std::time(nullptr);
        std::tm tm{};
        localtime_r(&now, &tm);
        char buf[2048];
        size_t n = std::strftime(buf, sizeof(buf), fmt.c_str(), &tm);
        return Value(std::string(buf, n));
      }));
  g.Set("range",
        Value::MakeBuiltin("range", [](Interpreter& in, CallArgs& a) -> absl::StatusOr<Value> {
          auto& p = a.positional;
          if (p.empty() || p.size() > 3) return in.Error("range expected 1 to 3 arguments");
          for (const Value& v : p) {
            if (!v.is_number() || v.is_float()) return in.Error("range() needs integers");
          }
          int64_t start = p.size() > 1 ? p[0].as_int() : 0;
          int64_t stop = p.size() > 1 ? p[1].as_int() : p[0].as_int();
          int64_t step = p.size() > 2 ? p[2].as_int() : 1;
          if (step == 0) return in.Error("range() arg 3 must not be zero");
          List out;
          for (int64_t i = start; step > 0 ? i < stop : i > stop; i += step) {
            if (static_cast<int64_t>(out.size()) >= in.limits().max_loop_iterations) {
              return in.Error("range() is too large");
            }
            out.emplace_back(i);
            if ((step > 0 && i > INT64_MAX - step) || (step < 0 && i < INT64_MIN - step)) break;
          }
          return Value(std::move(out));
        }));
  g.Set("namespace",
        Value::MakeBuiltin("namespace", [](Interpreter& in, CallArgs& a) -> absl::StatusOr<Value> {
          Dict d;
          for (const Value& v : a.positional) {
            if (!v.is_dict()) return in.Error("namespace() positional argument must be a dict");
            for (const auto& [k, x] : v.as_dict().items()) d.Set(k, x);
          }
          for (const auto& [k, v] : a.keyword) d.Set(k, v);
          Value ns = Value::MakeNamespace(std::move(d));
          in.TrackNamespace(ns);
          return ns;
        }));
  g.Set("dict",
        Value::MakeBuiltin("dict", [](Interpreter& in, CallArgs& a) -> absl::StatusOr<Value> {
          Dict d;
          for (const Value& v : a.positional) {
            if (!v.is_dict()) return in.Error("dict() positional argument must be a dict");
            for (const auto& [k, x] : v.as_dict().items()) d.Set(k, x);
          }
          for (const auto& [k, v] : a.keyword) d.Set(k, v);
          return Value(std::move(d));
        }));
}

}  // namespace tandem::chat_template
