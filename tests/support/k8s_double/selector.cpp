// Label and field selectors, parsed as the API server parses them.
#include "pod_store.hpp"

#include <algorithm>
#include <cctype>
#include <stdexcept>

namespace cohort::k8s_double {

namespace json = boost::json;

namespace {

std::string str(const json::object& o, const char* key) {
    if (const auto* v = o.if_contains(key); v != nullptr && v->is_string()) return std::string(v->as_string());
    return {};
}

std::vector<std::string> split(const std::string& text, char by) {
    std::vector<std::string> out;
    std::string cur;
    int depth = 0;
    for (char c : text) {
        if (c == '(') ++depth;
        if (c == ')') --depth;
        if (c == by && depth == 0) {
            out.push_back(cur);
            cur.clear();
        } else {
            cur += c;
        }
    }
    out.push_back(cur);
    return out;
}

std::string trim(std::string s) {
    while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.pop_back();
    std::size_t i = 0;
    while (i < s.size() && std::isspace(static_cast<unsigned char>(s[i]))) ++i;
    return s.substr(i);
}

}  // namespace

Selector Selector::labels(const std::string& text) {
    Selector sel;
    for (std::string part : split(text, ',')) {
        part = trim(part);
        if (part.empty()) continue;
        Term t;
        std::size_t at;
        if (part.front() == '!') {
            t.op = Term::absent;
            t.key = trim(part.substr(1));
        } else if ((at = part.find("!=")) != std::string::npos) {
            t.op = Term::ne;
            t.key = trim(part.substr(0, at));
            t.values = {trim(part.substr(at + 2))};
        } else if ((at = part.find("==")) != std::string::npos) {
            t.key = trim(part.substr(0, at));
            t.values = {trim(part.substr(at + 2))};
        } else if ((at = part.find('=')) != std::string::npos) {
            t.key = trim(part.substr(0, at));
            t.values = {trim(part.substr(at + 1))};
        } else if ((at = part.find(" notin ")) != std::string::npos || (at = part.find(" in ")) != std::string::npos) {
            const bool notin = part.compare(at, 7, " notin ") == 0;
            t.op = notin ? Term::notin : Term::in;
            t.key = trim(part.substr(0, at));
            std::string rest = trim(part.substr(at + (notin ? 7 : 4)));
            if (rest.size() < 2 || rest.front() != '(' || rest.back() != ')')
                throw std::invalid_argument("unable to parse requirement: found '" + rest + "', expected: '('");
            for (const std::string& v : split(rest.substr(1, rest.size() - 2), ',')) t.values.push_back(trim(v));
        } else {
            t.op = Term::exists;
            t.key = part;
        }
        if (t.key.empty() || t.key.find(' ') != std::string::npos)
            throw std::invalid_argument("unable to parse requirement: invalid label key \"" + t.key + "\"");
        sel.terms_.push_back(std::move(t));
    }
    return sel;
}

Selector Selector::fields(const std::string& text) {
    Selector sel = labels(text);
    sel.on_fields_ = true;
    for (const Term& t : sel.terms_) {
        if (t.op != Term::eq && t.op != Term::ne)
            throw std::invalid_argument("invalid selector: '" + text + "'; can't understand '" + t.key + "'");
        if (t.key != "metadata.name" && t.key != "metadata.namespace" && t.key != "status.phase" &&
            t.key != "spec.nodeName")
            throw std::invalid_argument("\"" + t.key +
                                        "\" is not a known field selector: only \"metadata.name\", "
                                        "\"metadata.namespace\", \"spec.nodeName\", \"status.phase\"");
    }
    return sel;
}

bool Selector::matches(const json::object& pod) const {
    for (const Term& t : terms_) {
        std::optional<std::string> value;
        if (on_fields_) {
            const auto dot = t.key.find('.');
            const json::value* section = pod.if_contains(t.key.substr(0, dot));
            value = section != nullptr && section->is_object()
                        ? str(section->as_object(), t.key.substr(dot + 1).c_str())
                        : std::string();
        } else if (const json::value* meta = pod.if_contains("metadata"); meta != nullptr && meta->is_object()) {
            if (const json::value* labels = meta->as_object().if_contains("labels"); labels && labels->is_object()) {
                if (const json::value* v = labels->as_object().if_contains(t.key); v && v->is_string())
                    value = std::string(v->as_string());
            }
        }
        const auto in_values = [&] {
            return value && std::find(t.values.begin(), t.values.end(), *value) != t.values.end();
        };
        switch (t.op) {
            case Term::eq:
            case Term::in:
                if (!in_values()) return false;
                break;
            case Term::ne:
            case Term::notin:
                if (in_values()) return false;
                break;
            case Term::exists:
                if (!value) return false;
                break;
            case Term::absent:
                if (value) return false;
                break;
        }
    }
    return true;
}

}  // namespace cohort::k8s_double
