#include "server/chat_template/parser.h"

#include <set>

#include "absl/strings/str_cat.h"
#include "server/chat_template/lexer.h"
#include "server/chat_template/status_macros.h"

namespace tandem::chat_template {
namespace {

class Parser {
 public:
  explicit Parser(std::vector<Token> tokens) : tokens_(std::move(tokens)) {}

  absl::StatusOr<Body> ParseAll() {
    TMPL_ASSIGN_OR_RETURN(Body body, ParseBody({}));
    if (Peek().type != Token::Type::kEof) {
      return Error(Peek(), absl::StrCat("unexpected '", Peek(1).text, "' outside of any block"));
    }
    return body;
  }

 private:
  const Token& Peek(size_t ahead = 0) const {
    size_t i = std::min(pos_ + ahead, tokens_.size() - 1);
    return tokens_[i];
  }
  const Token& Next() {
    const Token& t = tokens_[std::min(pos_, tokens_.size() - 1)];
    if (pos_ < tokens_.size() - 1) ++pos_;
    return t;
  }
  bool IsOp(const char* op, size_t ahead = 0) const {
    return Peek(ahead).type == Token::Type::kOp && Peek(ahead).text == op;
  }
  bool IsName(const char* name, size_t ahead = 0) const {
    return Peek(ahead).type == Token::Type::kName && Peek(ahead).text == name;
  }

  absl::Status Error(const Token& at, const std::string& what) const {
    return absl::InvalidArgumentError(absl::StrCat("chat template syntax error at line ", at.line,
                                                   ", column ", at.column, ": ", what));
  }
  absl::Status Expected(const std::string& what) const {
    return Error(Peek(), absl::StrCat("expected ", what, ", got ", DescribeToken(Peek())));
  }
  absl::Status ExpectOp(const char* op) {
    if (!IsOp(op)) return Expected(absl::StrCat("'", op, "'"));
    Next();
    return absl::OkStatus();
  }
  absl::Status ExpectBlockEnd() {
    if (Peek().type != Token::Type::kBlockEnd) return Expected("'%}'");
    Next();
    return absl::OkStatus();
  }
  absl::StatusOr<std::string> ExpectName() {
    if (Peek().type != Token::Type::kName) return Expected("a name");
    return Next().text;
  }

  // Guards recursion in both statement and expression parsing.
  struct DepthGuard {
    explicit DepthGuard(int& d) : depth(d) { ++depth; }
    ~DepthGuard() { --depth; }
    int& depth;
  };
  absl::Status CheckDepth() const {
    if (depth_ > kMaxParseDepth) {
      return Error(Peek(), absl::StrCat("nesting deeper than ", kMaxParseDepth, " levels"));
    }
    return absl::OkStatus();
  }

  // Parses statements until a block tag whose name is in `ends`; leaves the stream at that
  // name (after "{%") so the caller can decide.
  absl::StatusOr<Body> ParseBody(const std::set<std::string>& ends) {
    DepthGuard g(depth_);
    TMPL_RETURN_IF_ERROR(CheckDepth());
    Body body;
    while (true) {
      const Token& t = Peek();
      switch (t.type) {
        case Token::Type::kEof:
          if (!ends.empty()) {
            std::string list;
            for (const auto& e : ends) list += (list.empty() ? "'" : " or '") + e + "'";
            return Error(t, absl::StrCat("unexpected end of template, expected ", list));
          }
          return body;
        case Token::Type::kText: {
          auto s = std::make_unique<Stmt>();
          s->kind = Stmt::Kind::kText;
          s->text = t.text;
          Next();
          body.push_back(std::move(s));
          break;
        }
        case Token::Type::kVarBegin: {
          auto s = std::make_unique<Stmt>();
          s->kind = Stmt::Kind::kOutput;
          s->line = t.line;
          s->column = t.column;
          Next();
          TMPL_ASSIGN_OR_RETURN(s->expr, ParseTuple(true));
          if (Peek().type != Token::Type::kVarEnd) return Expected("'}}'");
          Next();
          body.push_back(std::move(s));
          break;
        }
        case Token::Type::kBlockBegin: {
          const Token& name = Peek(1);
          if (name.type != Token::Type::kName) {
            Next();
            return Expected("a statement name after '{%'");
          }
          if (ends.count(name.text)) {
            Next();  // "{%"; the caller consumes the name
            return body;
          }
          Next();
          TMPL_ASSIGN_OR_RETURN(StmtPtr s, ParseStatement());
          body.push_back(std::move(s));
          break;
        }
        default:
          return Error(t, absl::StrCat("unexpected ", DescribeToken(t)));
      }
    }
  }

  absl::StatusOr<StmtPtr> ParseStatement() {
    const Token tag = Next();
    auto s = std::make_unique<Stmt>();
    s->line = tag.line;
    s->column = tag.column;
    const std::string& n = tag.text;
    if (n == "if") return ParseIf(std::move(s));
    if (n == "for") return ParseFor(std::move(s));
    if (n == "set") return ParseSet(std::move(s));
    if (n == "macro") return ParseMacro(std::move(s));
    if (n == "call") return ParseCallBlock(std::move(s));
    if (n == "filter") return ParseFilterBlock(std::move(s));
    if (n == "break" || n == "continue") {
      s->kind = n == "break" ? Stmt::Kind::kBreak : Stmt::Kind::kContinue;
      if (loop_depth_ == 0) {
        return Error(tag, absl::StrCat("'", n, "' outside of a for loop"));
      }
      TMPL_RETURN_IF_ERROR(ExpectBlockEnd());
      return s;
    }
    if (n == "with") return ParseWith(std::move(s));
    if (n == "generation") {
      // transformers' AssistantTracker marks assistant spans; rendering is unaffected.
      s->kind = Stmt::Kind::kScope;
      TMPL_RETURN_IF_ERROR(ExpectBlockEnd());
      TMPL_ASSIGN_OR_RETURN(Body b, ParseBody({"endgeneration"}));
      s->bodies.push_back(std::move(b));
      Next();
      TMPL_RETURN_IF_ERROR(ExpectBlockEnd());
      return s;
    }
    return Error(tag, absl::StrCat("unknown statement '", n, "'"));
  }

  absl::StatusOr<StmtPtr> ParseWith(StmtPtr s) {
    s->kind = Stmt::Kind::kWith;
    while (Peek().type != Token::Type::kBlockEnd) {
      if (!s->targets.empty()) TMPL_RETURN_IF_ERROR(ExpectOp(","));
      TMPL_ASSIGN_OR_RETURN(std::string name, ExpectName());
      TMPL_RETURN_IF_ERROR(ExpectOp("="));
      TMPL_ASSIGN_OR_RETURN(ExprPtr value, ParseExpression(true));
      s->targets.push_back(name);
      s->conditions.push_back(std::move(value));
    }
    Next();
    TMPL_ASSIGN_OR_RETURN(Body b, ParseBody({"endwith"}));
    s->bodies.push_back(std::move(b));
    Next();
    TMPL_RETURN_IF_ERROR(ExpectBlockEnd());
    return s;
  }

  absl::StatusOr<StmtPtr> ParseIf(StmtPtr s) {
    s->kind = Stmt::Kind::kIf;
    while (true) {
      TMPL_ASSIGN_OR_RETURN(ExprPtr cond, ParseTuple(true));
      TMPL_RETURN_IF_ERROR(ExpectBlockEnd());
      s->conditions.push_back(std::move(cond));
      TMPL_ASSIGN_OR_RETURN(Body b, ParseBody({"elif", "else", "endif"}));
      s->bodies.push_back(std::move(b));
      std::string tag = Next().text;
      if (tag == "elif") continue;
      if (tag == "else") {
        TMPL_RETURN_IF_ERROR(ExpectBlockEnd());
        TMPL_ASSIGN_OR_RETURN(Body e, ParseBody({"endif"}));
        s->bodies.push_back(std::move(e));
        Next();
      }
      TMPL_RETURN_IF_ERROR(ExpectBlockEnd());
      return s;
    }
  }

  absl::StatusOr<std::vector<std::string>> ParseTargets() {
    std::vector<std::string> targets;
    bool paren = IsOp("(");
    if (paren) Next();
    do {
      TMPL_ASSIGN_OR_RETURN(std::string name, ExpectName());
      targets.push_back(name);
    } while (IsOp(",") && (Next(), true));
    if (paren) TMPL_RETURN_IF_ERROR(ExpectOp(")"));
    return targets;
  }

  absl::StatusOr<StmtPtr> ParseFor(StmtPtr s) {
    s->kind = Stmt::Kind::kFor;
    TMPL_ASSIGN_OR_RETURN(s->targets, ParseTargets());
    if (!IsName("in")) return Expected("'in'");
    Next();
    TMPL_ASSIGN_OR_RETURN(s->expr, ParseTuple(false));
    if (IsName("if")) {
      Next();
      TMPL_ASSIGN_OR_RETURN(s->cond, ParseExpression(true));
    }
    if (IsName("recursive")) return Error(Peek(), "recursive for loops are not supported");
    TMPL_RETURN_IF_ERROR(ExpectBlockEnd());
    ++loop_depth_;
    TMPL_ASSIGN_OR_RETURN(Body b, ParseBody({"else", "endfor"}));
    --loop_depth_;
    s->bodies.push_back(std::move(b));
    if (Next().text == "else") {
      TMPL_RETURN_IF_ERROR(ExpectBlockEnd());
      // break/continue in the else branch belong to an enclosing loop, if any.
      int saved = loop_depth_;
      TMPL_ASSIGN_OR_RETURN(Body e, ParseBody({"endfor"}));
      loop_depth_ = saved;
      s->bodies.push_back(std::move(e));
      Next();
    }
    TMPL_RETURN_IF_ERROR(ExpectBlockEnd());
    return s;
  }

  absl::StatusOr<StmtPtr> ParseSet(StmtPtr s) {
    TMPL_ASSIGN_OR_RETURN(std::string first, ExpectName());
    s->targets.push_back(first);
    if (IsOp(".")) {
      Next();
      TMPL_ASSIGN_OR_RETURN(s->target_attr, ExpectName());
    } else {
      while (IsOp(",")) {
        Next();
        TMPL_ASSIGN_OR_RETURN(std::string more, ExpectName());
        s->targets.push_back(more);
      }
    }
    if (IsOp("=")) {
      Next();
      s->kind = Stmt::Kind::kSet;
      TMPL_ASSIGN_OR_RETURN(s->expr, ParseTuple(true));
      TMPL_RETURN_IF_ERROR(ExpectBlockEnd());
      return s;
    }
    if (s->targets.size() != 1 || !s->target_attr.empty()) return Expected("'='");
    s->kind = Stmt::Kind::kSetBlock;
    if (IsOp("|")) {
      TMPL_ASSIGN_OR_RETURN(s->filter, ParseFilterChain(nullptr));
    }
    TMPL_RETURN_IF_ERROR(ExpectBlockEnd());
    TMPL_ASSIGN_OR_RETURN(Body b, ParseBody({"endset"}));
    s->bodies.push_back(std::move(b));
    Next();
    TMPL_RETURN_IF_ERROR(ExpectBlockEnd());
    return s;
  }

  absl::Status ParseParams(MacroDef& def) {
    TMPL_RETURN_IF_ERROR(ExpectOp("("));
    while (!IsOp(")")) {
      if (!def.params.empty()) TMPL_RETURN_IF_ERROR(ExpectOp(","));
      TMPL_ASSIGN_OR_RETURN(std::string name, ExpectName());
      ExprPtr def_value;
      if (IsOp("=")) {
        Next();
        TMPL_ASSIGN_OR_RETURN(def_value, ParseExpression(true));
      } else if (!def.params.empty() && def.params.back().second) {
        return Error(Peek(), "non-default argument follows default argument");
      }
      def.params.emplace_back(name, std::move(def_value));
    }
    Next();
    return absl::OkStatus();
  }

  absl::StatusOr<StmtPtr> ParseMacro(StmtPtr s) {
    s->kind = Stmt::Kind::kMacro;
    s->macro = std::make_shared<MacroDef>();
    TMPL_ASSIGN_OR_RETURN(s->macro->name, ExpectName());
    TMPL_RETURN_IF_ERROR(ParseParams(*s->macro));
    TMPL_RETURN_IF_ERROR(ExpectBlockEnd());
    int saved = loop_depth_;
    loop_depth_ = 0;
    TMPL_ASSIGN_OR_RETURN(s->macro->body, ParseBody({"endmacro"}));
    loop_depth_ = saved;
    Next();
    if (Peek().type == Token::Type::kName && Peek().text == s->macro->name) Next();
    TMPL_RETURN_IF_ERROR(ExpectBlockEnd());
    return s;
  }

  absl::StatusOr<StmtPtr> ParseCallBlock(StmtPtr s) {
    s->kind = Stmt::Kind::kCallBlock;
    s->macro = std::make_shared<MacroDef>();
    s->macro->name = "caller";
    if (IsOp("(")) TMPL_RETURN_IF_ERROR(ParseParams(*s->macro));
    TMPL_ASSIGN_OR_RETURN(s->expr, ParseExpression(true));
    if (s->expr->kind != Expr::Kind::kCall) return Error(Peek(), "expected a call after 'call'");
    TMPL_RETURN_IF_ERROR(ExpectBlockEnd());
    int saved = loop_depth_;
    loop_depth_ = 0;
    TMPL_ASSIGN_OR_RETURN(s->macro->body, ParseBody({"endcall"}));
    loop_depth_ = saved;
    Next();
    TMPL_RETURN_IF_ERROR(ExpectBlockEnd());
    return s;
  }

  absl::StatusOr<StmtPtr> ParseFilterBlock(StmtPtr s) {
    s->kind = Stmt::Kind::kFilterBlock;
    TMPL_ASSIGN_OR_RETURN(s->filter, ParseFilterChain(nullptr, /*leading_bar=*/false));
    TMPL_RETURN_IF_ERROR(ExpectBlockEnd());
    TMPL_ASSIGN_OR_RETURN(Body b, ParseBody({"endfilter"}));
    s->bodies.push_back(std::move(b));
    Next();
    TMPL_RETURN_IF_ERROR(ExpectBlockEnd());
    return s;
  }

  // ---- Expressions, in jinja2's precedence order ----

  ExprPtr Make(Expr::Kind kind, const Token& at) {
    auto e = std::make_unique<Expr>();
    e->kind = kind;
    e->line = at.line;
    e->column = at.column;
    return e;
  }

  // `a, b` without brackets is a tuple (e.g. `{% set a, b = 1, 2 %}`).
  absl::StatusOr<ExprPtr> ParseTuple(bool with_condexpr) {
    const Token start = Peek();
    TMPL_ASSIGN_OR_RETURN(ExprPtr first, ParseExpression(with_condexpr));
    if (!IsOp(",")) return first;
    auto t = Make(Expr::Kind::kTuple, start);
    t->args.push_back(std::move(first));
    while (IsOp(",")) {
      Next();
      if (Peek().type == Token::Type::kBlockEnd || Peek().type == Token::Type::kVarEnd ||
          IsOp(")")) {
        break;
      }
      TMPL_ASSIGN_OR_RETURN(ExprPtr e, ParseExpression(with_condexpr));
      t->args.push_back(std::move(e));
    }
    return t;
  }

  absl::StatusOr<ExprPtr> ParseExpression(bool with_condexpr) {
    DepthGuard g(depth_);
    TMPL_RETURN_IF_ERROR(CheckDepth());
    if (!with_condexpr) return ParseOr();
    const Token start = Peek();
    TMPL_ASSIGN_OR_RETURN(ExprPtr expr, ParseOr());
    while (IsName("if")) {
      const Token at = Next();
      auto c = Make(Expr::Kind::kConditional, at);
      TMPL_ASSIGN_OR_RETURN(ExprPtr cond, ParseOr());
      ExprPtr else_expr;
      if (IsName("else")) {
        Next();
        TMPL_ASSIGN_OR_RETURN(else_expr, ParseExpression(true));
      }
      c->args.push_back(std::move(cond));
      c->args.push_back(std::move(expr));
      c->args.push_back(std::move(else_expr));
      expr = std::move(c);
    }
    return expr;
  }

  absl::StatusOr<ExprPtr> Binary(const Token& at, std::string op, ExprPtr l, ExprPtr r) {
    auto b = Make(Expr::Kind::kBinary, at);
    b->name = std::move(op);
    b->args.push_back(std::move(l));
    b->args.push_back(std::move(r));
    return b;
  }

  absl::StatusOr<ExprPtr> ParseOr() {
    TMPL_ASSIGN_OR_RETURN(ExprPtr l, ParseAnd());
    while (IsName("or")) {
      const Token at = Next();
      TMPL_ASSIGN_OR_RETURN(ExprPtr r, ParseAnd());
      TMPL_ASSIGN_OR_RETURN(l, Binary(at, "or", std::move(l), std::move(r)));
    }
    return l;
  }

  absl::StatusOr<ExprPtr> ParseAnd() {
    TMPL_ASSIGN_OR_RETURN(ExprPtr l, ParseNot());
    while (IsName("and")) {
      const Token at = Next();
      TMPL_ASSIGN_OR_RETURN(ExprPtr r, ParseNot());
      TMPL_ASSIGN_OR_RETURN(l, Binary(at, "and", std::move(l), std::move(r)));
    }
    return l;
  }

  absl::StatusOr<ExprPtr> ParseNot() {
    if (IsName("not")) {
      DepthGuard g(depth_);
      TMPL_RETURN_IF_ERROR(CheckDepth());
      const Token at = Next();
      auto n = Make(Expr::Kind::kNot, at);
      TMPL_ASSIGN_OR_RETURN(ExprPtr inner, ParseNot());
      n->args.push_back(std::move(inner));
      return n;
    }
    return ParseCompare();
  }

  // Chained comparisons (a < b < c) are rare in templates; they evaluate pairwise-and.
  absl::StatusOr<ExprPtr> ParseCompare() {
    TMPL_ASSIGN_OR_RETURN(ExprPtr l, ParseMath1());
    ExprPtr result;
    while (true) {
      std::string op;
      const Token at = Peek();
      if (at.type == Token::Type::kOp && (at.text == "==" || at.text == "!=" || at.text == "<" ||
                                          at.text == ">" || at.text == "<=" || at.text == ">=")) {
        op = at.text;
        Next();
      } else if (IsName("in")) {
        op = "in";
        Next();
      } else if (IsName("not") && IsName("in", 1)) {
        op = "notin";
        Next();
        Next();
      } else {
        break;
      }
      TMPL_ASSIGN_OR_RETURN(ExprPtr r, ParseMath1());
      if (!result) {
        result = Make(Expr::Kind::kCompareChain, at);
        result->args.push_back(std::move(l));
      }
      result->kwargs.emplace_back(op, std::move(r));
    }
    if (!result) return l;
    if (result->kwargs.size() == 1) {
      // The common case, a single comparison, is a plain binary node.
      result->kind = Expr::Kind::kBinary;
      result->name = result->kwargs[0].first;
      result->args.push_back(std::move(result->kwargs[0].second));
      result->kwargs.clear();
    }
    return result;
  }

  absl::StatusOr<ExprPtr> ParseMath1() {
    TMPL_ASSIGN_OR_RETURN(ExprPtr l, ParseConcat());
    while (IsOp("+") || IsOp("-")) {
      const Token at = Next();
      TMPL_ASSIGN_OR_RETURN(ExprPtr r, ParseConcat());
      TMPL_ASSIGN_OR_RETURN(l, Binary(at, at.text, std::move(l), std::move(r)));
    }
    return l;
  }

  absl::StatusOr<ExprPtr> ParseConcat() {
    TMPL_ASSIGN_OR_RETURN(ExprPtr l, ParseMath2());
    while (IsOp("~")) {
      const Token at = Next();
      TMPL_ASSIGN_OR_RETURN(ExprPtr r, ParseMath2());
      TMPL_ASSIGN_OR_RETURN(l, Binary(at, "~", std::move(l), std::move(r)));
    }
    return l;
  }

  absl::StatusOr<ExprPtr> ParseMath2() {
    TMPL_ASSIGN_OR_RETURN(ExprPtr l, ParsePow());
    while (IsOp("*") || IsOp("/") || IsOp("//") || IsOp("%")) {
      const Token at = Next();
      TMPL_ASSIGN_OR_RETURN(ExprPtr r, ParsePow());
      TMPL_ASSIGN_OR_RETURN(l, Binary(at, at.text, std::move(l), std::move(r)));
    }
    return l;
  }

  absl::StatusOr<ExprPtr> ParsePow() {
    TMPL_ASSIGN_OR_RETURN(ExprPtr l, ParseUnary(true));
    while (IsOp("**")) {
      const Token at = Next();
      TMPL_ASSIGN_OR_RETURN(ExprPtr r, ParseUnary(true));
      TMPL_ASSIGN_OR_RETURN(l, Binary(at, "**", std::move(l), std::move(r)));
    }
    return l;
  }

  absl::StatusOr<ExprPtr> ParseUnary(bool with_filter) {
    DepthGuard g(depth_);
    TMPL_RETURN_IF_ERROR(CheckDepth());
    ExprPtr node;
    if (IsOp("-") || IsOp("+")) {
      const Token at = Next();
      node = Make(at.text == "-" ? Expr::Kind::kNeg : Expr::Kind::kPos, at);
      TMPL_ASSIGN_OR_RETURN(ExprPtr inner, ParseUnary(false));
      node->args.push_back(std::move(inner));
    } else {
      TMPL_ASSIGN_OR_RETURN(node, ParsePrimary());
    }
    TMPL_ASSIGN_OR_RETURN(node, ParsePostfix(std::move(node)));
    if (with_filter) {
      while (IsOp("|") || IsName("is")) {
        if (IsOp("|")) {
          TMPL_ASSIGN_OR_RETURN(node, ParseFilterChain(std::move(node)));
        } else {
          TMPL_ASSIGN_OR_RETURN(node, ParseTest(std::move(node)));
        }
      }
    }
    return node;
  }

  absl::StatusOr<ExprPtr> ParsePrimary() {
    const Token t = Peek();
    switch (t.type) {
      case Token::Type::kName: {
        Next();
        if (t.text == "true" || t.text == "True" || t.text == "false" || t.text == "False") {
          auto e = Make(Expr::Kind::kLiteral, t);
          e->literal = Value(t.text[0] == 't' || t.text[0] == 'T');
          return e;
        }
        if (t.text == "none" || t.text == "None") {
          auto e = Make(Expr::Kind::kLiteral, t);
          e->literal = Value::None();
          return e;
        }
        auto e = Make(Expr::Kind::kName, t);
        e->name = t.text;
        return e;
      }
      case Token::Type::kString: {
        std::string s;
        while (Peek().type == Token::Type::kString) s += Next().text;  // "a" "b" joins
        auto e = Make(Expr::Kind::kLiteral, t);
        e->literal = Value(std::move(s));
        return e;
      }
      case Token::Type::kInt: {
        Next();
        auto e = Make(Expr::Kind::kLiteral, t);
        errno = 0;
        char* end = nullptr;
        long long v = std::strtoll(t.text.c_str(), &end, 10);
        if (errno == ERANGE) return Error(t, "integer literal out of 64-bit range");
        e->literal = Value(static_cast<int64_t>(v));
        return e;
      }
      case Token::Type::kFloat: {
        Next();
        auto e = Make(Expr::Kind::kLiteral, t);
        e->literal = Value(std::strtod(t.text.c_str(), nullptr));
        return e;
      }
      case Token::Type::kOp:
        if (t.text == "(") {
          Next();
          if (IsOp(")")) {
            Next();
            return Make(Expr::Kind::kTuple, t);
          }
          TMPL_ASSIGN_OR_RETURN(ExprPtr inner, ParseTuple(true));
          TMPL_RETURN_IF_ERROR(ExpectOp(")"));
          return inner;
        }
        if (t.text == "[") {
          Next();
          auto e = Make(Expr::Kind::kList, t);
          while (!IsOp("]")) {
            if (!e->args.empty()) {
              TMPL_RETURN_IF_ERROR(ExpectOp(","));
              if (IsOp("]")) break;
            }
            TMPL_ASSIGN_OR_RETURN(ExprPtr item, ParseExpression(true));
            e->args.push_back(std::move(item));
          }
          Next();
          return e;
        }
        if (t.text == "{") {
          Next();
          auto e = Make(Expr::Kind::kDict, t);
          while (!IsOp("}")) {
            if (!e->args.empty()) {
              TMPL_RETURN_IF_ERROR(ExpectOp(","));
              if (IsOp("}")) break;
            }
            TMPL_ASSIGN_OR_RETURN(ExprPtr key, ParseExpression(true));
            TMPL_RETURN_IF_ERROR(ExpectOp(":"));
            TMPL_ASSIGN_OR_RETURN(ExprPtr value, ParseExpression(true));
            e->args.push_back(std::move(key));
            e->args.push_back(std::move(value));
          }
          Next();
          return e;
        }
        break;
      default:
        break;
    }
    return Expected("an expression");
  }

  absl::Status ParseCallArgs(Expr& call) {
    TMPL_RETURN_IF_ERROR(ExpectOp("("));
    bool first = true;
    bool star = false, star_star = false;
    while (!IsOp(")")) {
      if (!first) {
        TMPL_RETURN_IF_ERROR(ExpectOp(","));
        if (IsOp(")")) break;
      }
      first = false;
      // f(*items, **mapping), at most one of each, after the plain arguments (as jinja2 has it).
      if (IsOp("*") || IsOp("**")) {
        const bool double_star = IsOp("**");
        if (star_star || (star && !double_star)) {
          return Error(Peek(), "invalid syntax for function call expression");
        }
        Next();
        TMPL_ASSIGN_OR_RETURN(ExprPtr v, ParseExpression(true));
        call.kwargs.emplace_back(double_star ? kStarKwargs : kStarArgs, std::move(v));
        (double_star ? star_star : star) = true;
        continue;
      }
      const bool keyword = Peek().type == Token::Type::kName && IsOp("=", 1);
      if (star_star || (star && !keyword)) {
        return Error(Peek(), "invalid syntax for function call expression");
      }
      if (keyword) {
        std::string key = Next().text;
        Next();
        TMPL_ASSIGN_OR_RETURN(ExprPtr v, ParseExpression(true));
        call.kwargs.emplace_back(key, std::move(v));
      } else {
        if (!call.kwargs.empty()) {
          return Error(Peek(), "positional argument follows keyword argument");
        }
        TMPL_ASSIGN_OR_RETURN(ExprPtr v, ParseExpression(true));
        call.args.push_back(std::move(v));
      }
    }
    Next();
    return absl::OkStatus();
  }

  absl::StatusOr<ExprPtr> ParseSubscriptPart() {
    if (IsOp(":") || IsOp("]")) return ExprPtr();
    return ParseExpression(true);
  }

  absl::StatusOr<ExprPtr> ParsePostfix(ExprPtr node) {
    while (true) {
      const Token at = Peek();
      if (IsOp(".")) {
        Next();
        auto e = Make(Expr::Kind::kGetAttr, at);
        if (Peek().type == Token::Type::kName) {
          e->name = Next().text;
        } else if (Peek().type == Token::Type::kInt) {
          // `items.0` is item access in jinja2.
          e->kind = Expr::Kind::kGetItem;
          auto idx = Make(Expr::Kind::kLiteral, Peek());
          idx->literal =
              Value(static_cast<int64_t>(std::strtoll(Next().text.c_str(), nullptr, 10)));
          e->args.push_back(std::move(node));
          e->args.push_back(std::move(idx));
          node = std::move(e);
          continue;
        } else {
          return Expected("an attribute name after '.'");
        }
        e->args.push_back(std::move(node));
        node = std::move(e);
      } else if (IsOp("[")) {
        Next();
        TMPL_ASSIGN_OR_RETURN(ExprPtr a, ParseSubscriptPart());
        if (IsOp(":")) {
          auto e = Make(Expr::Kind::kSlice, at);
          Next();
          TMPL_ASSIGN_OR_RETURN(ExprPtr b, ParseSubscriptPart());
          ExprPtr c;
          if (IsOp(":")) {
            Next();
            TMPL_ASSIGN_OR_RETURN(c, ParseSubscriptPart());
          }
          e->args.push_back(std::move(node));
          e->args.push_back(std::move(a));
          e->args.push_back(std::move(b));
          e->args.push_back(std::move(c));
          node = std::move(e);
        } else {
          if (!a) return Expected("an index");
          auto e = Make(Expr::Kind::kGetItem, at);
          e->args.push_back(std::move(node));
          e->args.push_back(std::move(a));
          node = std::move(e);
        }
        TMPL_RETURN_IF_ERROR(ExpectOp("]"));
      } else if (IsOp("(")) {
        auto e = Make(Expr::Kind::kCall, at);
        e->args.push_back(std::move(node));
        TMPL_RETURN_IF_ERROR(ParseCallArgs(*e));
        node = std::move(e);
      } else {
        return node;
      }
    }
  }

  // `x | f | g(1)`; with a null `node` it builds the chain for a filter block, whose
  // innermost argument is filled in at render time.
  absl::StatusOr<ExprPtr> ParseFilterChain(ExprPtr node, bool leading_bar = true) {
    bool first = true;
    while ((first && !leading_bar) || IsOp("|")) {
      if (!(first && !leading_bar)) Next();
      first = false;
      const Token at = Peek();
      TMPL_ASSIGN_OR_RETURN(std::string name, ExpectName());
      auto f = Make(Expr::Kind::kFilter, at);
      f->name = name;
      f->args.push_back(std::move(node));
      if (IsOp("(")) TMPL_RETURN_IF_ERROR(ParseCallArgs(*f));
      node = std::move(f);
    }
    return node;
  }

  absl::StatusOr<ExprPtr> ParseTest(ExprPtr node) {
    const Token at = Next();  // "is"
    auto t = Make(Expr::Kind::kTest, at);
    if (IsName("not")) {
      Next();
      t->negated = true;
    }
    TMPL_ASSIGN_OR_RETURN(t->name, ExpectName());
    t->args.push_back(std::move(node));
    if (IsOp("(")) {
      TMPL_RETURN_IF_ERROR(ParseCallArgs(*t));
    } else {
      const Token& n = Peek();
      bool arg_follows =
          n.type == Token::Type::kString || n.type == Token::Type::kInt ||
          n.type == Token::Type::kFloat ||
          (n.type == Token::Type::kOp && (n.text == "[" || n.text == "{")) ||
          (n.type == Token::Type::kName && n.text != "else" && n.text != "or" && n.text != "and" &&
           n.text != "if" && n.text != "is" && n.text != "in" && n.text != "not");
      if (arg_follows) {
        TMPL_ASSIGN_OR_RETURN(ExprPtr arg, ParsePrimary());
        TMPL_ASSIGN_OR_RETURN(arg, ParsePostfix(std::move(arg)));
        t->args.push_back(std::move(arg));
      }
    }
    return t;
  }

  std::vector<Token> tokens_;
  size_t pos_ = 0;
  int depth_ = 0;
  int loop_depth_ = 0;
};

}  // namespace

absl::StatusOr<Body> ParseTemplate(const std::string& source) {
  auto tokens = Tokenize(source);
  if (!tokens.ok()) return tokens.status();
  return Parser(std::move(*tokens)).ParseAll();
}

}  // namespace tandem::chat_template
