// Rule files: YAML or JSON, one schema, read into a RuleSet.
//
//   version: 1                  # required in every file; only 1 exists
//   include: [common.yaml, packs/]
//       # optional: a path or a list of paths, relative to this file's folder
//       # (to the working directory for RuleSet::from_string). A folder means
//       # every *.yaml, *.yml and *.json directly in it, in name order. Included
//       # files are read before this file's own sections, so their rules come
//       # first. A file reached twice (a diamond) is read once; a file that
//       # includes itself, directly or not, is an error naming the chain.
//   allow_unhandled_actions: false   # optional; true in any file of the set
//       # lets the set use action types no handler is registered for
//   variables: {gpu_memory: number, file_type: string}
//       # optional type declarations, checked when conditions compile: bool or
//       # boolean, int or integer, size (integer bytes), number or float,
//       # duration (number of seconds), string, list. Declaring a name twice
//       # with the same type is fine, with another type an error. Once a set
//       # declares any variable, conditions may use only declared ones (a
//       # misspelt name is an error suggesting the closest).
//   lists: {model_exts: ['.pt', '.pth']}   # named lists of values
//   macros: {memory_pressure: "gpu_memory > 85"}   # named condition fragments
//       # Variables, lists and macros share one namespace of condition names
//       # (letters, digits, '_' and '.', not starting with a digit, not a
//       # keyword such as 'and' or 'in'). A list or macro no rule uses is a
//       # warning (RuleSet::warnings).
//   templates:
//     NAME:
//       description: text              # optional
//       parameters: {metric: {}, threshold: {default: 85}}   # or [metric, threshold]
//       rules: [...]                   # required, rule mappings as below
//       # Every scalar value of the rules (not the keys) may hold `{param}`
//       # placeholders; a placeholder that names no parameter is an error, a
//       # parameter no placeholder uses a warning. A scalar that is exactly one
//       # placeholder takes the value as written in `with:` (30 stays an
//       # integer, true a boolean); otherwise the values' texts are spliced in
//       # and the result is text. In conditions the text goes in as is, so a
//       # string literal must be quoted by the template: "file_type == '{t}'".
//   rules:                             # optional; a list of
//     - id: reduce_prefetch            # required, unique across all files,
//                                      # no spaces
//       description: text              # optional
//       condition: "gpu_memory > 85"   # required, the condition language
//       actions:                       # required, at least one
//         - type: reduce_prefetch      # required
//           target: prefetcher         # optional
//           parameters: {factor: 0.5}  # optional, single values; unquoted
//                                      # true/false, integers and numbers are
//                                      # typed, everything else is text
//       priority: 10                   # integer, default 0, higher first
//       enabled: true                  # default true
//       for: 30s                       # durations: 250ms, 30s, 5m, 2h, 1d,
//       keep_firing_for: 1m            # 1h30m, or a plain number of seconds;
//       cooldown: 5m                   # default 0 (engine.cpp says what they do)
//       labels: {severity: warning}    # optional, names to text
//     - use: NAME                      # instantiates template NAME
//       with: {metric: gpu_temperature, threshold: 87}   # parameter values;
//                                      # one missing (with no default) or
//                                      # unknown is an error naming both
//       id_prefix: node0_              # optional, prefixed to every rule id
//       enabled: false                 # optional overrides for every rule it
//       priority: 5                    # makes; labels are merged, these win
//       labels: {team: storage}
//
// Whether every action type has a handler is checked when an engine loads
// the set (RuleEngine::load), where the handlers are known.
//
// Every error is Error(parse) with "file:line:column: field.path: what"; an
// error inside a template's rule starts with the `use:` site:
// "main.yaml:9:5: rules[2]: in template 't': main.yaml:4:11: templates.t.rules[0].condition: ...".
#include "config/document.hpp"
#include "core/text.hpp"
#include "rules/rule_reader.hpp"
#include "rules/rule_set_data.hpp"
#include "rules/templates.hpp"

#include <cohort/error.hpp>
#include <cohort/rules.hpp>

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <set>

#include <fmt/format.h>

namespace cohort {

namespace {

namespace fs = std::filesystem;
using detail::Document;
using detail::Field;

bool is_condition_name(std::string_view name) {
    if (name.empty() || !(std::isalpha(static_cast<unsigned char>(name[0])) || name[0] == '_')) return false;
    for (char c : name)
        if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_' && c != '.') return false;
    std::string lower(name);
    for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    static constexpr std::string_view kKeywords[] = {"and",      "or",         "not",      "in",   "matches",
                                                     "contains", "startswith", "endswith", "true", "false"};
    return std::find(std::begin(kKeywords), std::end(kKeywords), lower) == std::end(kKeywords);
}

class Loader {
public:
    // `site` is the include item that names the file, null for the top one.
    void load_file(const fs::path& path, const Field* site);
    void load_text(std::string_view text, Format format, std::string source) {
        documents_.push_back(std::make_unique<Document>(text, format, std::move(source)));
        read_document(*documents_.back(), fs::current_path());
    }
    std::unique_ptr<RuleSet::Data> finish();

private:
    void read_document(const Document& document, const fs::path& folder);
    void read_include(const Document& document, const Field& item, const fs::path& folder);
    void read_variables(const Document& document, const Field& field);
    void claim_name(const Document& document, const Field& field, const std::string& name, std::string_view kind);
    void add_rule(detail::Instance instance, bool from_template);

    std::vector<std::unique_ptr<Document>> documents_;  // templates point into them
    std::vector<fs::path> stack_;                       // the files being read, for cycles
    std::vector<std::string> stack_names_;
    std::set<fs::path> done_;
    std::vector<std::pair<const Document*, Field>> rule_lists_;  // every file's `rules`, in reading order
    detail::Templates templates_;
    std::map<std::string, std::string, std::less<>> template_origins_;
    std::map<std::string, std::string, std::less<>> names_;  // condition name -> "a list at file:line:col"
    std::map<std::string, std::string, std::less<>> list_origins_;
    std::map<std::string, std::string, std::less<>> rule_sources_;
    std::unique_ptr<RuleSet::Data> data_ = std::make_unique<RuleSet::Data>();
};

void Loader::load_file(const fs::path& path, const Field* site) {
    std::error_code ec;
    fs::path canonical = fs::weakly_canonical(path, ec);
    if (ec) canonical = fs::absolute(path).lexically_normal();
    for (std::size_t i = 0; i < stack_.size(); ++i) {
        if (stack_[i] != canonical) continue;
        std::string chain;
        for (std::size_t j = i; j < stack_.size(); ++j) chain += stack_names_[j] + " -> ";
        site->fail(fmt::format("include cycle: {}{}", chain, path.string()));
    }
    if (done_.contains(canonical)) return;
    std::string text;
    try {
        text = detail::read_text_file(path);
    } catch (const Error& e) {
        if (site == nullptr) throw;
        site->fail(e.what());
    }
    documents_.push_back(
        std::make_unique<Document>(text, detail::format_from_extension(path, Format::automatic), path.string()));
    stack_.push_back(canonical);
    stack_names_.push_back(path.string());
    read_document(*documents_.back(), path.parent_path());
    stack_.pop_back();
    stack_names_.pop_back();
    done_.insert(canonical);
}

void Loader::read_include(const Document& document, const Field& item, const fs::path& folder) {
    const std::string name = detail::read_text(item, nullptr);
    const fs::path target = (folder / name).lexically_normal();
    std::error_code ec;
    if (!fs::is_directory(target, ec)) {
        if (!fs::exists(target, ec))
            item.fail(fmt::format("cannot include '{}': {} does not exist", name, target.string()));
        load_file(target, &item);
        return;
    }
    std::vector<fs::path> files;
    for (const auto& entry : fs::directory_iterator(target, ec)) {
        if (entry.is_regular_file() && detail::format_from_extension(entry.path(), Format::listing) != Format::listing)
            files.push_back(entry.path());
    }
    if (ec) item.fail(fmt::format("cannot include '{}': {}", name, ec.message()));
    if (files.empty())
        data_->warnings.push_back(fmt::format("{}: folder '{}' holds no .yaml, .yml or .json files",
                                              detail::locate(document, item), target.string()));
    std::sort(files.begin(), files.end(),
              [](const fs::path& a, const fs::path& b) { return a.filename().string() < b.filename().string(); });
    for (const fs::path& file : files) load_file(file, &item);
}

// A name conditions use: one meaning across all files.
void Loader::claim_name(const Document& document, const Field& field, const std::string& name, std::string_view kind) {
    if (!is_condition_name(name))
        field.fail(
            fmt::format("'{}' cannot be used in conditions: a {} name is letters, digits, '_' and '.', "
                        "does not start with a digit and is not a keyword",
                        name, kind));
    const std::string here = fmt::format("a {} at {}", kind, detail::position(document, field));
    auto [it, inserted] = names_.emplace(name, here);
    if (!inserted) field.fail(fmt::format("'{}' is already defined as {}", name, it->second));
}

void Loader::read_variables(const Document& document, const Field& field) {
    for (const auto& [name, value] : detail::read_entries(document, field, "variable names to types")) {
        const std::string text = detail::read_text(value, nullptr);
        const auto type = parse_type(text);
        if (!type) {
            std::string message = fmt::format("unknown type '{}'", text);
            if (auto near = detail::closest_word(text, {"bool", "boolean", "int", "integer", "size", "number", "float",
                                                        "duration", "string", "list"}))
                message += fmt::format(" (did you mean '{}'?)", *near);
            else
                message += " (expected bool, int, size, number, duration, string or list)";
            value.fail(message);
        }
        if (auto known = data_->variables.find(name); known != data_->variables.end()) {
            if (known->second != *type)
                value.fail(fmt::format("variable '{}' is declared {} here but {} at {}", name, to_string(*type),
                                       to_string(known->second), data_->variable_origins[name]));
            continue;
        }
        claim_name(document, value, name, "variable");
        data_->variables.emplace(name, *type);
        data_->variable_origins.emplace(name, detail::locate(document, value));
    }
}

void Loader::read_document(const Document& document, const fs::path& folder) {
    const Field root = document.root();
    if (root.is_null()) root.fail("empty document: expected a mapping with 'version: 1' and 'rules'");
    root.expect_map(
        {"version", "include", "allow_unhandled_actions", "variables", "lists", "macros", "templates", "rules"});
    const auto version = root.get("version");
    if (!version) root.fail("missing required field 'version' (write 'version: 1')");
    if (!version->node().IsScalar() || version->node().Scalar() != "1")
        version->fail(
            fmt::format("unsupported version {} (this cohort reads version 1)", detail::describe(version->node())));
    if (auto include = root.get("include")) {
        if (include->node().IsSequence()) {
            for (const Field& item : include->items()) read_include(document, item, folder);
        } else {
            read_include(document, *include, folder);
        }
    }
    if (auto f = root.get("allow_unhandled_actions"))
        data_->allow_unhandled_actions = detail::read_bool(*f, nullptr) || data_->allow_unhandled_actions;
    if (auto f = root.get("variables")) read_variables(document, *f);
    if (auto f = root.get("lists")) {
        for (const auto& [name, value] : detail::read_entries(document, *f, "list names to lists")) {
            claim_name(document, value, name, "list");
            std::vector<Value> values;
            for (const Field& item : value.items()) {
                if (!item.node().IsScalar())
                    item.fail(fmt::format("expected a single value (text, a number or true/false), got {}",
                                          detail::describe(item.node())));
                values.push_back(detail::typed_value(detail::read_scalar(item, nullptr)));
            }
            data_->definitions.lists.emplace(name, std::move(values));
            list_origins_.emplace(name, detail::locate(document, value));
        }
    }
    if (auto f = root.get("macros")) {
        for (const auto& [name, value] : detail::read_entries(document, *f, "macro names to conditions")) {
            claim_name(document, value, name, "macro");
            data_->definitions.macros.emplace(name, detail::read_text(value, nullptr));
            data_->macro_origins.emplace(name, detail::locate(document, value));
        }
    }
    if (auto f = root.get("templates")) {
        for (const auto& [name, value] : detail::read_entries(document, *f, "template names to templates")) {
            if (auto first = template_origins_.find(name); first != template_origins_.end())
                value.fail(fmt::format("duplicate template '{}' (first defined at {})", name, first->second));
            templates_.emplace(name, detail::read_template(document, value, name, data_->warnings));
            template_origins_.emplace(name, detail::position(document, value));
        }
    }
    if (auto f = root.get("rules")) {
        f->items();  // a list, checked now so the error comes in file order
        rule_lists_.emplace_back(&document, *f);
    }
}

void Loader::add_rule(detail::Instance instance, bool from_template) {
    const Rule& rule = instance.rule;
    auto [first, inserted] = rule_sources_.emplace(rule.id, rule.source);
    if (!inserted) {
        throw Error(Errc::parse,
                    fmt::format("{}: duplicate rule id '{}' (first defined at {}){}", instance.origin.id, rule.id,
                                first->second,
                                from_template ? "; give each use of the template its own id_prefix, or put a "
                                                "parameter in the rule's id"
                                              : ""));
    }
    data_->rules.push_back(std::move(instance.rule));
    data_->origins.push_back(std::move(instance.origin));
}

std::unique_ptr<RuleSet::Data> Loader::finish() {
    for (const auto& [document, list] : rule_lists_) {
        for (const Field& item : list.items()) {
            if (item.node().IsMap() && item.get("use")) {
                for (detail::Instance& instance : detail::instantiate(templates_, *document, item))
                    add_rule(std::move(instance), true);
            } else {
                detail::Instance instance;
                detail::read_rule(*document, item, nullptr, instance.rule, instance.origin);
                add_rule(std::move(instance), false);
            }
        }
    }
    std::set<std::string, std::less<>> used;
    for (const Rule& rule : data_->rules) used.merge(data_->used_definitions(rule.condition));
    for (const auto& [name, where] : list_origins_)
        if (!used.contains(name))
            data_->warnings.push_back(fmt::format("{}: list '{}' is not used by any rule", where, name));
    for (const auto& [name, where] : data_->macro_origins)
        if (!used.contains(name))
            data_->warnings.push_back(fmt::format("{}: macro '{}' is not used by any rule", where, name));
    if (data_->rules.empty()) data_->warnings.push_back("the rule set has no rules");
    // Declaring any variable turns on the check that catches misspelt ones.
    data_->definitions.declared_only = !data_->variables.empty();
    return std::move(data_);
}

// Compiling against a private symbol table checks every condition now; an
// engine compiles them again against its own.
std::unique_ptr<RuleSet::Data> checked(std::unique_ptr<RuleSet::Data> data) {
    data->compile(std::make_shared<Symbols>());
    return data;
}

}  // namespace

RuleSet RuleSet::from_file(const std::filesystem::path& path) {
    Loader loader;
    loader.load_file(path, nullptr);
    return RuleSet(checked(loader.finish()));
}

RuleSet RuleSet::from_string(std::string_view text, Format format, std::string_view source_name) {
    if (format == Format::listing)
        throw Error(Errc::invalid_argument, "a rule set is YAML or JSON; the listing format is for datasets");
    Loader loader;
    loader.load_text(text, format, std::string(source_name));
    return RuleSet(checked(loader.finish()));
}

}  // namespace cohort
