// The parsed template. Nodes are plain structs with a kind tag and generic children: the
// evaluator switches on the kind, and the conventions for each kind are documented there.
#ifndef TANDEM_SERVER_CHAT_TEMPLATE_AST_H_
#define TANDEM_SERVER_CHAT_TEMPLATE_AST_H_

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "server/chat_template/value.h"

namespace tandem::chat_template {

struct Expr;
using ExprPtr = std::unique_ptr<Expr>;

// Names in Expr::kwargs that no keyword can have: `f(*items)` and `f(**mapping)`.
inline constexpr const char* kStarArgs = "*";
inline constexpr const char* kStarKwargs = "**";

struct Expr {
  enum class Kind {
    kLiteral,       // literal
    kName,          // name
    kList,          // args = items
    kTuple,         // args = items (evaluates to a list)
    kDict,          // args = alternating key, value
    kGetAttr,       // args[0] . name
    kGetItem,       // args[0] [ args[1] ]
    kSlice,         // args[0] [ args[1] : args[2] : args[3] ] (null = omitted)
    kCall,          // args[0] ( args[1..] , kwargs ); kwargs named kStarArgs / kStarKwargs
                    // hold *items / **mapping
    kFilter,        // args[0] | name ( args[1..], kwargs ); args[0] null in a filter block
    kTest,          // args[0] is [not] name ( args[1..] ); negated
    kNot,           // not args[0]
    kNeg,           // - args[0]
    kPos,           // + args[0]
    kBinary,        // args[0] name args[1]; name is the operator ("and", "in", "notin", "~", ...)
    kConditional,   // args[1] if args[0] else args[2] (args[2] null = undefined)
    kCompareChain,  // args[0] kwargs[0].first kwargs[0].second kwargs[1].first ... (a < b < c)
  };
  Kind kind;
  int line = 0;
  int column = 0;
  std::string name;
  Value literal;
  bool negated = false;
  std::vector<ExprPtr> args;
  std::vector<std::pair<std::string, ExprPtr>> kwargs;
};

struct Stmt;
using StmtPtr = std::unique_ptr<Stmt>;
using Body = std::vector<StmtPtr>;

struct MacroDef {
  std::string name;
  std::vector<std::pair<std::string, ExprPtr>> params;  // default null = required
  Body body;
};

struct Stmt {
  enum class Kind {
    kText,         // text
    kOutput,       // {{ expr }}
    kIf,           // conditions[i] guards bodies[i]; bodies.back() is else when longer
    kFor,          // targets in expr [if cond]; bodies[0] loop, bodies[1] else
    kSet,          // targets (or target_attr on targets[0]) = expr
    kSetBlock,     // targets[0] = rendered bodies[0], optionally through filter
    kMacro,        // macro
    kCallBlock,    // {% call expr %} bodies[0] is caller()
    kFilterBlock,  // bodies[0] rendered through filter
    kBreak,
    kContinue,
    kScope,  // bodies[0] rendered inline (e.g. {% generation %})
    kWith,   // targets[i] = conditions[i] in a new scope around bodies[0]
  };
  Kind kind;
  int line = 0;
  int column = 0;
  std::string text;
  ExprPtr expr;
  ExprPtr cond;
  ExprPtr filter;
  std::vector<std::string> targets;
  std::string target_attr;
  std::vector<ExprPtr> conditions;
  std::vector<Body> bodies;
  std::shared_ptr<MacroDef> macro;
};

}  // namespace tandem::chat_template

#endif  // TANDEM_SERVER_CHAT_TEMPLATE_AST_H_
