// Values, symbol tables and contexts: what conditions read.
#include <cohort/error.hpp>
#include <cohort/expression.hpp>

#include "rules/lexer.hpp"

#include <charconv>
#include <cmath>

#include <boost/json/serialize.hpp>
#include <boost/json/string.hpp>
#include <fmt/format.h>

namespace cohort {

namespace {

constexpr std::string_view kTypeNames[] = {"", "bool", "int", "number", "string", "list"};

}  // namespace

std::string_view to_string(Type type) noexcept { return kTypeNames[static_cast<int>(type)]; }

std::optional<Type> parse_type(std::string_view text) noexcept {
    if (text == "bool" || text == "boolean") return Type::boolean;
    if (text == "int" || text == "integer" || text == "size") return Type::integer;
    if (text == "number" || text == "float" || text == "double" || text == "duration") return Type::number;
    if (text == "string") return Type::string;
    if (text == "list") return Type::list;
    return std::nullopt;
}

std::string Value::to_string() const {
    if (!type_) return "missing";
    switch (*type_) {
        case Type::boolean: return b_ ? "true" : "false";
        case Type::integer: return fmt::format("{}", i_);
        case Type::number: return fmt::format("{}", d_);
        case Type::string: return boost::json::serialize(boost::json::string(s_));
        case Type::list: return "[...]";
    }
    return "?";
}

Value Value::parse(std::string_view text) {
    if (text == "true") return Value(true);
    if (text == "false") return Value(false);
    if (text.size() >= 2 && (text.front() == '\'' || text.front() == '"') && text.back() == text.front())
        return Value(std::string(text.substr(1, text.size() - 2)));
    int64_t i = 0;
    if (auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), i);
        ec == std::errc() && end == text.data() + text.size())
        return Value(i);
    double d = 0;
    if (auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), d);
        ec == std::errc() && end == text.data() + text.size() && std::isfinite(d))
        return Value(d);
    if (auto seconds = detail::parse_duration_literal(text)) return Value(*seconds);
    if (auto bytes = detail::parse_size_literal(text)) return Value(static_cast<int64_t>(*bytes));
    return Value(std::string(text));
}

bool Value::operator==(const Value& other) const {
    if (type_ != other.type_) return false;
    if (!type_) return true;
    switch (*type_) {
        case Type::boolean: return b_ == other.b_;
        case Type::integer: return i_ == other.i_;
        case Type::number: return d_ == other.d_;
        case Type::string: return s_ == other.s_;
        case Type::list: return true;
    }
    return false;
}

uint32_t Symbols::slot(std::string_view name) {
    if (auto it = index_.find(name); it != index_.end()) return it->second;
    const auto slot = static_cast<uint32_t>(names_.size());
    names_.emplace_back(name);
    types_.emplace_back();
    index_.emplace(std::string(name), slot);
    return slot;
}

std::optional<uint32_t> Symbols::find(std::string_view name) const {
    if (auto it = index_.find(name); it != index_.end()) return it->second;
    return std::nullopt;
}

void Symbols::declare(std::string_view name, Type type) {
    const uint32_t s = slot(name);
    if (types_[s] && *types_[s] != type) {
        throw Error(Errc::invalid_argument, fmt::format("variable '{}' is declared {} and cannot also be {}", name,
                                                        cohort::to_string(*types_[s]), cohort::to_string(type)));
    }
    types_[s] = type;
}

Context::Context(std::shared_ptr<const Symbols> symbols) : symbols_(std::move(symbols)), slots_(symbols_->size()) {}

Context::Slot& Context::writable(uint32_t slot) {
    // Symbols may have grown since this context was made (a rule compiled
    // later, a reload): grow with them.
    if (slot >= slots_.size()) slots_.resize(std::max<std::size_t>(slot + 1, symbols_->size()));
    return slots_[slot];
}

void Context::set(uint32_t slot, bool value) {
    Slot& s = writable(slot);
    s.type = Type::boolean;
    s.present = true;
    s.b = value;
}

void Context::set(uint32_t slot, int64_t value) {
    Slot& s = writable(slot);
    s.type = Type::integer;
    s.present = true;
    s.i = value;
    s.d = static_cast<double>(value);
}

void Context::set(uint32_t slot, double value) {
    Slot& s = writable(slot);
    s.type = Type::number;
    s.present = true;
    s.d = value;
}

void Context::set(uint32_t slot, std::string_view value) {
    Slot& s = writable(slot);
    s.type = Type::string;
    s.present = true;
    s.s.assign(value.data(), value.size());
}

void Context::set(std::string_view name, Value value) {
    auto slot = symbols_->find(name);
    if (!slot) throw Error(Errc::not_found, fmt::format("no condition uses a variable named '{}'", name));
    if (value.missing()) {
        writable(*slot).present = false;
        return;
    }
    if (auto declared = symbols_->declared(*slot)) {
        const bool fits = *declared == *value.type() || (*declared == Type::number && *value.type() == Type::integer);
        if (!fits) {
            throw Error(Errc::invalid_argument, fmt::format("variable '{}' is declared {}, got {} {}", name,
                                                            cohort::to_string(*declared),
                                                            cohort::to_string(*value.type()), value.to_string()));
        }
        if (*declared == Type::number && *value.type() == Type::integer) value = Value(value.as_number());
    }
    switch (*value.type()) {
        case Type::boolean: set(*slot, value.as_bool()); break;
        case Type::integer: set(*slot, value.as_int()); break;
        case Type::number: set(*slot, value.as_number()); break;
        case Type::string: set(*slot, std::string_view(value.as_string())); break;
        case Type::list: throw Error(Errc::invalid_argument, fmt::format("variable '{}': lists cannot be set", name));
    }
}

void Context::unset(std::string_view name) {
    if (auto slot = symbols_->find(name); slot && *slot < slots_.size()) slots_[*slot].present = false;
}

void Context::clear() {
    for (Slot& s : slots_) s.present = false;
}

Value Context::get(std::string_view name) const {
    auto slot = symbols_->find(name);
    if (!slot || *slot >= slots_.size() || !slots_[*slot].present) return {};
    const Slot& s = slots_[*slot];
    switch (s.type) {
        case Type::boolean: return Value(s.b);
        case Type::integer: return Value(s.i);
        case Type::number: return Value(s.d);
        case Type::string: return Value(s.s);
        default: return {};
    }
}

}  // namespace cohort
