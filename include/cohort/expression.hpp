// Compiled conditions: `gpu_memory > 85 AND file_type == 'model'`, compiled
// once against a symbol table (variables bound to slots), evaluated many
// times against a Context with no allocation and no string hashing. The
// language is in docs/rules.md.
#pragma once

#include <cohort/export.hpp>

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace cohort {

// Types of values. Sizes are integers of bytes (`100MB`), durations numbers
// of seconds (`250ms` is 0.25).
enum class Type : uint8_t { boolean = 1, integer = 2, number = 3, string = 4, list = 5 };

COHORT_API std::string_view to_string(Type type) noexcept;
// "bool"/"boolean", "int"/"integer", "size" (an integer), "number"/"float",
// "duration" (a number), "string", "list".
COHORT_API std::optional<Type> parse_type(std::string_view text) noexcept;

// Three-valued truth: a condition on a variable missing from the context is
// unknown; `unknown OR true` is true and `unknown AND false` is false.
enum class Truth : uint8_t { no = 0, yes = 1, unknown = 2 };

// A scalar a context variable or an action parameter holds.
class COHORT_API Value {
public:
    Value() = default;  // missing
    Value(bool b) : type_(Type::boolean), b_(b) {}
    Value(int64_t i) : type_(Type::integer), i_(i) {}
    Value(int i) : Value(static_cast<int64_t>(i)) {}
    Value(double d) : type_(Type::number), d_(d) {}
    Value(std::string s) : type_(Type::string), s_(std::move(s)) {}
    Value(const char* s) : Value(std::string(s)) {}

    bool missing() const { return !type_; }
    std::optional<Type> type() const { return type_; }
    bool as_bool() const { return b_; }
    int64_t as_int() const { return i_; }
    double as_number() const { return type_ == Type::integer ? static_cast<double>(i_) : d_; }
    const std::string& as_string() const { return s_; }
    // JSON-style text: true, 42, 0.5, "model".
    std::string to_string() const;
    // From text as a person types it: true/false, 42, 0.5, 100MB (bytes),
    // 30s (seconds), 'quoted' or "quoted", else the text as a string.
    static Value parse(std::string_view text);
    bool operator==(const Value& other) const;

private:
    std::optional<Type> type_;
    bool b_ = false;
    int64_t i_ = 0;
    double d_ = 0;
    std::string s_;
};

// Variables by name, each bound to a slot when first named; optionally with
// a declared type, checked when expressions compile.
class COHORT_API Symbols {
public:
    uint32_t slot(std::string_view name);  // adds the name if new
    std::optional<uint32_t> find(std::string_view name) const;
    // Throws Error(invalid_argument) if declared before with another type.
    void declare(std::string_view name, Type type);
    std::optional<Type> declared(uint32_t slot) const { return types_[slot]; }
    const std::string& name(uint32_t slot) const { return names_[slot]; }
    uint32_t size() const { return static_cast<uint32_t>(names_.size()); }
    std::span<const std::string> names() const { return names_; }

private:
    std::vector<std::string> names_;
    std::vector<std::optional<Type>> types_;
    std::map<std::string, uint32_t, std::less<>> index_;
};

// The values of variables for one evaluation. Setting by slot is the fast
// path; setting by name looks the slot up once.
class COHORT_API Context {
public:
    explicit Context(std::shared_ptr<const Symbols> symbols);

    // Throws Error(not_found) for a name no expression uses, and
    // Error(invalid_argument) for a value of the wrong declared type.
    void set(std::string_view name, Value value);
    void set(uint32_t slot, bool value);
    void set(uint32_t slot, int64_t value);
    void set(uint32_t slot, double value);
    // The text is copied into a buffer the context reuses.
    void set(uint32_t slot, std::string_view value);
    void unset(std::string_view name);
    void clear();
    Value get(std::string_view name) const;
    const Symbols& symbols() const { return *symbols_; }

    // What evaluation reads; one entry per slot.
    struct Slot {
        Type type;  // valid when present
        bool present = false;
        bool b = false;
        int64_t i = 0;
        double d = 0;
        std::string s;
    };
    const Slot* slot_at(uint32_t slot) const { return slot < slots_.size() ? &slots_[slot] : nullptr; }

private:
    Slot& writable(uint32_t slot);
    std::shared_ptr<const Symbols> symbols_;
    std::vector<Slot> slots_;
};

// Named lists (`model_exts: ['.pt', '.pth']`) and macros (condition
// fragments) an expression may use by name.
struct Definitions {
    std::map<std::string, std::vector<Value>, std::less<>> lists;
    std::map<std::string, std::string, std::less<>> macros;
    // Only declared variables (Symbols::declare) may be used; any other name
    // is an error suggesting the closest declared one.
    bool declared_only = false;
};

// The outcome of one evaluation.
struct Outcome {
    Truth truth = Truth::unknown;
    std::vector<std::string> missing;  // variables that made it unknown
    std::string error;                 // a type error found while evaluating
};

// One sub-expression's value, for explaining why a condition held or not.
struct ExplainStep {
    std::string text;  // the sub-expression's source
    std::string value; // "true", "91.5", "'model'", "unknown (gpu_memory is missing)"
    int depth = 0;     // nesting, 0 for the whole expression
};

class COHORT_API Expression {
public:
    // Throws Error(parse) with a caret line under the error and, for
    // unknown names, the closest known one:
    //   1:12: unknown function 'lenght' (did you mean 'len'?)
    //   gpu_memory > lenght(x)
    //              ^
    // `source` prefixes the message (e.g. "rules.yaml:14:16: rule 'x'").
    static Expression compile(std::string_view text, std::shared_ptr<Symbols> symbols,
                              const Definitions& definitions = {}, std::string_view source = {});
    // Compiles with a private symbol table.
    static Expression compile(std::string_view text);

    Expression(Expression&&) noexcept;
    Expression& operator=(Expression&&) noexcept;
    ~Expression();

    // The fast path: yes, no or unknown (a type error counts as unknown).
    Truth test(const Context& context) const;
    Outcome evaluate(const Context& context) const;
    // The value of the whole expression (a number for `a + 1`, ...).
    Value value(const Context& context) const;
    std::vector<ExplainStep> explain(const Context& context) const;

    const std::string& text() const;
    // The result type when it is known at compile time.
    std::optional<Type> type() const;
    std::vector<std::string> variables() const;
    const std::shared_ptr<Symbols>& symbols() const;
    // A Context for this expression's symbols.
    Context context() const;

    struct Program;

private:
    explicit Expression(std::unique_ptr<Program> program);
    std::unique_ptr<Program> program_;
};

}  // namespace cohort
