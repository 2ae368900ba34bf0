// The rule packs shipped in rules/: they load, and each rule fires exactly
// when its description says, AND clauses included, with the actions and
// parameters a program's handlers rely on.
#include "support.hpp"

#include <cohort/rules.hpp>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace cohort::test {
namespace {

using namespace std::string_literals;
using ::testing::ElementsAre;
using ::testing::ElementsAreArray;
using ::testing::HasSubstr;

// rules/ in the source tree: tests/data/../../rules.
std::filesystem::path pack(const std::string& name) {
    return std::filesystem::path(COHORT_TEST_DATA_DEFAULT).parent_path().parent_path() / "rules" / name;
}

std::vector<std::string> ids(const Evaluation& evaluation) {
    std::vector<std::string> out;
    for (const Firing& firing : evaluation.fired) out.push_back(firing.rule);
    return out;
}

std::string describe(const Evaluation& evaluation) {
    std::string out = "fired:";
    for (const Firing& firing : evaluation.fired) out += " " + firing.rule;
    for (const RuleError& error : evaluation.errors) out += "; error " + error.rule + ": " + error.message;
    return out;
}

// ------------------------------------------------------------------ gpu_io

constexpr const char* kReduce = "reduce_prefetch_on_memory_pressure";
constexpr const char* kDelay = "delay_transfer_on_temperature";
constexpr const char* kPrioritize = "prioritize_model_files";
constexpr const char* kStage = "stage_large_transfers";

// A node where nothing is wrong: every variable set, no rule true.
std::map<std::string, Value> calm_node() {
    return {{"gpu_memory", Value(50.0)},
            {"gpu_memory_busy", Value(10.0)},
            {"gpu_temperature", Value(60.0)},
            {"file_type", Value("dataset")},
            {"transfer_size", Value(int64_t{1'000'000})},
            {"active_training", Value(false)},
            {"transfer_priority", Value(int64_t{0})},
            {"prefetch", Value(false)}};
}

// One evaluation of the GPU/I/O pack on a fresh engine (no state carried
// over from another case), the calm node with `changes` applied.
Evaluation evaluate_gpu_io(const std::map<std::string, Value>& changes) {
    RuleEngine engine(EngineOptions{.allow_unhandled_actions = true});
    engine.load(pack("gpu_io.yaml"));
    Context context = engine.context();
    auto values = calm_node();
    for (const auto& [name, value] : changes) values[name] = value;
    for (const auto& [name, value] : values) context.set(name, value);
    return engine.evaluate(context, 1000.0);
}

TEST(GpuIoPack, LoadsWithTheDocumentedRulesAndVariables) {
    const RuleSet set = RuleSet::from_file(pack("gpu_io.yaml"));
    EXPECT_TRUE(set.warnings().empty()) << set.warnings().front();
    std::vector<std::string> rule_ids;
    for (const Rule& rule : set.rules()) rule_ids.push_back(rule.id);
    EXPECT_THAT(rule_ids, ElementsAre(kReduce, kDelay, kPrioritize, kStage));
    EXPECT_FALSE(set.allows_unhandled_actions());
    const std::map<std::string, Type, std::less<>> expected{
        {"gpu_memory", Type::number}, {"gpu_memory_busy", Type::number}, {"gpu_temperature", Type::number},
        {"file_type", Type::string},  {"transfer_size", Type::integer},  {"active_training", Type::boolean},
        {"transfer_priority", Type::integer}, {"prefetch", Type::boolean}};
    EXPECT_EQ(set.variables(), expected);
    for (const Rule& rule : set.rules()) {
        EXPECT_FALSE(rule.description.empty()) << rule.id;
        EXPECT_TRUE(rule.enabled) << rule.id;
        EXPECT_TRUE(rule.labels.contains("category")) << rule.id;
    }
}

TEST(GpuIoPack, EachRuleFiresExactlyWhenItsWholeConditionHolds) {
    struct Case {
        const char* what;
        std::map<std::string, Value> changes;
        std::vector<std::string> fired;
    };
    const std::vector<Case> cases = {
        {"a calm node", {}, {}},
        {"memory at exactly 85 %", {{"gpu_memory", Value(85.0)}}, {}},
        {"memory above 85 %", {{"gpu_memory", Value(85.5)}}, {kReduce}},
        {"memory as an integer", {{"gpu_memory", Value(86)}}, {kReduce}},
        {"temperature at exactly 87", {{"gpu_temperature", Value(87.0)}}, {}},
        {"temperature above 87", {{"gpu_temperature", Value(88.0)}}, {kDelay}},
        // The thermal hold is for transfers that can wait: below priority 10.
        {"hot, priority 9", {{"gpu_temperature", Value(88.0)}, {"transfer_priority", Value(9)}}, {kDelay}},
        {"hot, priority 10", {{"gpu_temperature", Value(88.0)}, {"transfer_priority", Value(10)}}, {}},
        {"hot, priority 100, a prefetch",
         {{"gpu_temperature", Value(95.0)}, {"transfer_priority", Value(100)}, {"prefetch", Value(true)}},
         {}},
        {"hot, a negative priority", {{"gpu_temperature", Value(88.0)}, {"transfer_priority", Value(-5)}}, {kDelay}},
        {"cool, priority 0", {{"gpu_temperature", Value(86.0)}, {"transfer_priority", Value(0)}}, {}},
        // prioritize_model_files needs both halves of its AND.
        {"pressure but a dataset", {{"gpu_memory", Value(90.0)}, {"file_type", Value("dataset")}}, {kReduce}},
        {"pressure but a checkpoint", {{"gpu_memory", Value(82.0)}, {"file_type", Value("checkpoint")}}, {}},
        {"a model but no pressure", {{"gpu_memory", Value(80.0)}, {"file_type", Value("model")}}, {}},
        {"a model under pressure", {{"gpu_memory", Value(82.0)}, {"file_type", Value("model")}}, {kPrioritize}},
        {"case matters in file_type", {{"gpu_memory", Value(82.0)}, {"file_type", Value("Model")}}, {}},
        // stage_large_transfers needs both halves of its AND.
        {"large but not training", {{"transfer_size", Value(int64_t{5'000'000'000})}}, {}},
        {"training but small", {{"active_training", Value(true)}, {"transfer_size", Value(int64_t{100'000'000})}}, {}},
        {"training and large",
         {{"active_training", Value(true)}, {"transfer_size", Value(int64_t{100'000'001})}},
         {kStage}},
        // gpu_memory_busy is bandwidth, not capacity: it triggers nothing.
        {"memory bus saturated", {{"gpu_memory_busy", Value(100.0)}}, {}},
        {"memory bus saturated, a model", {{"gpu_memory_busy", Value(99.0)}, {"file_type", Value("model")}}, {}},
    };
    for (const Case& c : cases) {
        const Evaluation evaluation = evaluate_gpu_io(c.changes);
        EXPECT_THAT(ids(evaluation), ElementsAreArray(c.fired)) << c.what << ": " << describe(evaluation);
        EXPECT_TRUE(evaluation.errors.empty()) << c.what << ": " << describe(evaluation);
    }
}

TEST(GpuIoPack, EveryMatchingRuleFiresInPriorityOrder) {
    const Evaluation evaluation = evaluate_gpu_io({{"gpu_memory", Value(95.0)},
                                                   {"gpu_temperature", Value(91.0)},
                                                   {"file_type", Value("model")},
                                                   {"active_training", Value(true)},
                                                   {"transfer_size", Value::parse("2GiB")}});
    EXPECT_THAT(ids(evaluation), ElementsAre(kReduce, kDelay, kPrioritize, kStage)) << describe(evaluation);
    std::vector<int64_t> priorities;
    for (const Firing& firing : evaluation.fired) priorities.push_back(firing.priority);
    EXPECT_TRUE(std::is_sorted(priorities.rbegin(), priorities.rend())) << describe(evaluation);
}

TEST(GpuIoPack, ActionsCarryTheirTypesTargetsAndParameters) {
    const Evaluation evaluation = evaluate_gpu_io({{"gpu_memory", Value(95.0)},
                                                   {"gpu_temperature", Value(91.0)},
                                                   {"file_type", Value("model")},
                                                   {"active_training", Value(true)},
                                                   {"transfer_size", Value::parse("200MB")}});
    ASSERT_EQ(evaluation.fired.size(), 4u) << describe(evaluation);
    std::map<std::string, Action> by_rule;
    for (const Firing& firing : evaluation.fired) {
        ASSERT_EQ(firing.actions.size(), 1u) << firing.rule;
        by_rule.emplace(firing.rule, firing.actions[0]);
    }
    const Action& reduce = by_rule.at(kReduce);
    EXPECT_EQ(reduce.type, "reduce_prefetch");
    EXPECT_EQ(reduce.target, "data_loader");
    ASSERT_TRUE(reduce.parameters.contains("factor"));
    EXPECT_EQ(reduce.parameters.at("factor"), Value(0.5));

    const Action& delay = by_rule.at(kDelay);
    EXPECT_EQ(delay.type, "delay_transfer");
    EXPECT_EQ(delay.target, "host_to_device");
    ASSERT_TRUE(delay.parameters.contains("delay"));
    // Parameters with units stay text; a handler reads them with Value::parse.
    EXPECT_EQ(delay.parameters.at("delay"), Value("30s"));
    EXPECT_EQ(Value::parse(delay.parameters.at("delay").as_string()), Value(30.0));

    EXPECT_EQ(by_rule.at(kPrioritize).type, "prioritize");
    EXPECT_EQ(by_rule.at(kStage).type, "stage_transfer");
    EXPECT_EQ(evaluation.fired[1].labels.at("category"), "thermal");
}

TEST(GpuIoPack, LoadingWithoutHandlersNamesTheMissingActionType) {
    RuleEngine engine;  // unhandled actions not allowed, and the pack does not allow them
    const std::string message = error_message(Errc::parse, [&] { engine.load(pack("gpu_io.yaml")); });
    EXPECT_THAT(message, HasSubstr("gpu_io.yaml:"));
    EXPECT_THAT(message, HasSubstr("rule 'reduce_prefetch_on_memory_pressure' uses action type 'reduce_prefetch', "
                                   "which has no handler"));
    EXPECT_EQ(engine.rules(), nullptr);  // nothing loaded
}

TEST(GpuIoPack, HandlersRunForEveryFiringRuleInPriorityOrder) {
    RuleEngine engine;
    std::vector<std::string> calls;
    for (const char* type : {"reduce_prefetch", "delay_transfer", "prioritize", "stage_transfer"}) {
        engine.on(type, [&calls](const Firing& firing, const Action& action) {
            calls.push_back(firing.rule + "/" + action.type);
        });
    }
    engine.load(pack("gpu_io.yaml"));
    Context context = engine.context();
    context.set("gpu_memory", Value(90.0));
    context.set("gpu_temperature", Value(88.0));
    context.set("file_type", Value("model"));
    context.set("active_training", Value(true));
    context.set("transfer_size", Value::parse("1GB"));
    context.set("transfer_priority", Value(0));
    const Evaluation evaluation = engine.evaluate(context, 0);
    EXPECT_TRUE(evaluation.errors.empty()) << describe(evaluation);
    EXPECT_THAT(calls, ElementsAre("reduce_prefetch_on_memory_pressure/reduce_prefetch",
                                   "delay_transfer_on_temperature/delay_transfer", "prioritize_model_files/prioritize",
                                   "stage_large_transfers/stage_transfer"));
}

TEST(GpuIoPack, VariablesAreTyped) {
    RuleEngine engine(EngineOptions{.allow_unhandled_actions = true});
    engine.load(pack("gpu_io.yaml"));
    Context context = engine.context();
    EXPECT_THAT(error_message(Errc::invalid_argument, [&] { context.set("gpu_memory", Value("high")); }),
                HasSubstr("variable 'gpu_memory' is declared number"));
    EXPECT_THAT(error_message(Errc::invalid_argument, [&] { context.set("active_training", Value(1)); }),
                HasSubstr("variable 'active_training' is declared bool"));
    // Sizes typed as a person would: 150MB is 150,000,000 bytes.
    context.set("transfer_size", Value::parse("150MB"));
    EXPECT_EQ(context.get("transfer_size"), Value(int64_t{150'000'000}));
}

TEST(GpuIoPack, AMissingVariableIsReportedUnlessTheOtherSideDecides) {
    RuleEngine engine(EngineOptions{.allow_unhandled_actions = true});
    engine.load(pack("gpu_io.yaml"));
    Context context = engine.context();
    // gpu_memory unknown, file_type 'model': prioritize_model_files cannot be
    // decided, does not fire, and says which variable is missing.
    context.set("file_type", Value("model"));
    context.set("gpu_temperature", Value(60.0));
    context.set("active_training", Value(false));
    Evaluation evaluation = engine.evaluate(context, 0);
    EXPECT_TRUE(ids(evaluation).empty());
    std::map<std::string, std::string> errors;
    for (const RuleError& e : evaluation.errors) errors[e.rule] = e.message;
    ASSERT_TRUE(errors.contains(kPrioritize)) << describe(evaluation);
    EXPECT_THAT(errors[kPrioritize], HasSubstr("'gpu_memory'"));
    EXPECT_TRUE(errors.contains(kReduce)) << describe(evaluation);
    // `false AND unknown` is false: not training decides stage_large_transfers
    // without transfer_size, so it reports nothing.
    EXPECT_FALSE(errors.contains(kStage)) << describe(evaluation);
    // A dataset decides prioritize_model_files without gpu_memory.
    context.set("file_type", Value("dataset"));
    evaluation = engine.evaluate(context, 1);
    for (const RuleError& e : evaluation.errors) EXPECT_NE(e.rule, kPrioritize) << e.message;
}

TEST(GpuIoPack, ReducePrefetchActsAtMostOncePer15Seconds) {
    RuleEngine engine(EngineOptions{.allow_unhandled_actions = true});
    engine.load(pack("gpu_io.yaml"));
    Context context = engine.context();
    for (const auto& [name, value] : calm_node()) context.set(name, value);
    context.set("gpu_memory", Value(92.0));
    std::vector<double> fired_at;
    for (double t = 0; t <= 40; t += 1) {
        if (ids(engine.evaluate(context, t)) == std::vector<std::string>{kReduce}) fired_at.push_back(t);
    }
    EXPECT_THAT(fired_at, ElementsAre(0.0, 15.0, 30.0));
    EXPECT_EQ(engine.state(kReduce), RuleState::firing);
}

TEST(GpuIoPack, DelayTransferRefiresEvery30SecondsWhileHot) {
    RuleEngine engine(EngineOptions{.allow_unhandled_actions = true});
    engine.load(pack("gpu_io.yaml"));
    Context context = engine.context();
    for (const auto& [name, value] : calm_node()) context.set(name, value);
    std::vector<double> fired_at;
    // Hot for 70 s, hovering across the threshold from 40 s to 50 s, then cool.
    for (double t = 0; t <= 100; t += 5) {
        const bool hovering = t >= 40 && t <= 50;
        context.set("gpu_temperature", Value(t > 70 ? 70.0 : hovering && static_cast<int>(t) % 10 == 0 ? 86.0 : 89.0));
        if (!ids(engine.evaluate(context, t)).empty()) fired_at.push_back(t);
    }
    EXPECT_THAT(fired_at, ElementsAre(0.0, 30.0, 60.0));
    EXPECT_EQ(engine.state(kDelay), RuleState::inactive);
}

// The per-transfer rules describe one transfer per evaluation: each matching
// transfer must get its action, not only the first of a run of them.
TEST(GpuIoPack, PerTransferRulesActOnEveryMatchingTransfer) {
    RuleEngine engine(EngineOptions{.allow_unhandled_actions = true});
    engine.load(pack("gpu_io.yaml"));
    Context context = engine.context();
    for (const auto& [name, value] : calm_node()) context.set(name, value);
    context.set("gpu_memory", Value(82.0));
    context.set("active_training", Value(true));
    int prioritized = 0, staged = 0;
    const std::vector<std::pair<const char*, int64_t>> transfers = {
        {"model", 1'000'000}, {"model", 2'000'000}, {"model", 500'000'000}, {"dataset", 300'000'000}};
    double now = 0;
    for (const auto& [type, size] : transfers) {
        context.set("file_type", Value(type));
        context.set("transfer_size", Value(size));
        for (const std::string& rule : ids(engine.evaluate(context, now += 0.001))) {
            prioritized += rule == kPrioritize ? 1 : 0;
            staged += rule == kStage ? 1 : 0;
        }
    }
    EXPECT_EQ(prioritized, 3) << "every model file under memory pressure";
    EXPECT_EQ(staged, 2) << "every transfer over 100 MB during training";
}

// ------------------------------------------------------------------ frameworks

// First bytes of real files, as a program would read them.
std::string zip_entry(const std::string& name) {
    std::string header = "PK\x03\x04"s + "\x14\x00\x00\x00\x08\x00"s + std::string(16, '\x01');
    header += static_cast<char>(name.size());
    header += "\x00\x00\x00"s;
    return header + name + "\x00\x00"s;
}
const std::string kTorchZip = zip_entry("archive/data.pkl");
const std::string kTorchZipOld = zip_entry("resnet50/data.pkl");
const std::string kOtherZip = zip_entry("docs/readme.txt");
const std::string kTorchLegacy =
    "\x80\x02\x8a\x0a\x6c\xfc\x9c\x46\xf9\x20\x6a\xa8\x50\x19.\x80\x02M\xe9\x03.\x80\x02}q\x00(X\x10"s;
const std::string kPickle4 = "\x80\x04\x95\x1b\x01\x00\x00\x00\x00\x00\x00}\x94(\x8c\x05model"s;
const std::string kSafetensors = "\x58\x01\x00\x00\x00\x00\x00\x00{\"__metadata__\":{\"format\":\"pt\"},\"w\":"s;
const std::string kHdf5 = "\x89HDF\r\n\x1a\n\x00\x00\x00\x00\x00\x08\x08\x00\x04\x00\x10\x00"s;
const std::string kText = "hello, world\n";

struct Detection {
    std::string framework;
    double confidence = 0;
};

class FrameworksPack : public ::testing::Test {
protected:
    FrameworksPack() : engine_(EngineOptions{.allow_unhandled_actions = true}), context_(load(engine_)) {}

    static Context load(RuleEngine& engine) {
        engine.load(pack("frameworks.yaml"));
        return engine.context();
    }

    // Every rule that fires for this file. One engine serves file after file,
    // as in a program (DetectsEveryFileOfARun checks that this works).
    Evaluation detect_all(const std::string& path, const std::optional<std::string>& header) {
        context_.clear();
        context_.set("path", Value(path));
        if (header) context_.set("header", Value(*header));
        return engine_.evaluate(context_, now_ += 1);
    }

    // The most confident answer (the first firing), checked for shape.
    std::optional<Detection> detect(const std::string& path, const std::optional<std::string>& header = ""s) {
        const Evaluation evaluation = detect_all(path, header);
        if (header) {
            EXPECT_TRUE(evaluation.errors.empty()) << path << ": " << describe(evaluation);
        }
        double previous = 2;
        for (const Firing& firing : evaluation.fired) {
            EXPECT_EQ(firing.actions.size(), 1u) << firing.rule;
            const Action& action = firing.actions.at(0);
            EXPECT_EQ(action.type, "detect_framework") << firing.rule;
            const double confidence = action.parameters.at("confidence").as_number();
            EXPECT_GT(confidence, 0) << firing.rule;
            EXPECT_LE(confidence, 1) << firing.rule;
            // Priority follows confidence, so the first answer is the best.
            EXPECT_EQ(firing.priority, static_cast<int64_t>(confidence * 100 + 0.5)) << firing.rule;
            EXPECT_LE(confidence, previous) << firing.rule << " fired after a less confident rule";
            previous = confidence;
            EXPECT_EQ(firing.labels.at("framework"), action.parameters.at("framework").as_string()) << firing.rule;
        }
        if (evaluation.fired.empty()) return std::nullopt;
        const Action& best = evaluation.fired[0].actions.at(0);
        return Detection{best.parameters.at("framework").as_string(), best.parameters.at("confidence").as_number()};
    }

    RuleEngine engine_;
    Context context_;
    double now_ = 0;
};

TEST_F(FrameworksPack, LoadsCleanly) {
    const RuleSet set = RuleSet::from_file(pack("frameworks.yaml"));
    EXPECT_TRUE(set.warnings().empty()) << set.warnings().front();
    EXPECT_GE(set.rules().size(), 10u);
    const std::vector<std::string> frameworks = {"pytorch", "tensorflow", "jax", "safetensors", "huggingface"};
    std::map<std::string, int> rules_per_framework;
    for (const Rule& rule : set.rules()) {
        ASSERT_EQ(rule.actions.size(), 1u) << rule.id;
        const std::string framework = rule.actions[0].parameters.at("framework").as_string();
        EXPECT_NE(std::find(frameworks.begin(), frameworks.end(), framework), frameworks.end()) << rule.id;
        ++rules_per_framework[framework];
    }
    for (const std::string& framework : frameworks) EXPECT_GE(rules_per_framework[framework], 1) << framework;
}

TEST_F(FrameworksPack, DetectsFrameworksFromPathsAndHeaders) {
    struct Case {
        std::string path;
        std::string header;
        std::string framework;
        double confidence;
    };
    const std::vector<Case> cases = {
        // PyTorch: header markers beat the extension; .bin and .ckpt need them.
        {"ckpt/model.pt", "", "pytorch", 0.7},
        {"weights/RESNET50.PTH", "", "pytorch", 0.7},
        {"ckpt/model.pt", kTorchZip, "pytorch", 0.97},
        {"epoch=3-step=1000.ckpt", kTorchZip, "pytorch", 0.97},
        {"shard.bin", kTorchZipOld, "pytorch", 0.97},
        {"renamed.weights", kTorchZip, "pytorch", 0.97},
        {"old/model.pth", kTorchLegacy, "pytorch", 0.99},
        {"old/model.bin", kTorchLegacy, "pytorch", 0.99},
        {"weights.bin", kPickle4, "pytorch", 0.85},
        {"last.ckpt", kPickle4, "pytorch", 0.85},
        {"checkpoint.pth.tar", kPickle4, "pytorch", 0.85},
        // TensorFlow.
        {"export/1/saved_model.pb", "", "tensorflow", 0.95},
        {"export/1/saved_model.pbtxt", "", "tensorflow", 0.95},
        {"frozen_graph.pb", "", "tensorflow", 0.6},
        {"keras/model.h5", kHdf5, "tensorflow", 0.95},
        {"keras/model.H5", "", "tensorflow", 0.6},
        {"data/train.tfrecord", "", "tensorflow", 0.9},
        {"data/mnist-train.tfrecord-00003-of-00016", "", "tensorflow", 0.9},
        {"tf/model.ckpt-1000.index", "", "tensorflow", 0.9},
        {"tf/model.ckpt-1000.data-00000-of-00001", "", "tensorflow", 0.9},
        {"tf/model.ckpt.meta", "", "tensorflow", 0.9},
        {"tf2/ckpt-3.index", "", "tensorflow", 0.9},
        {"export/1/variables/variables.index", "", "tensorflow", 0.9},
        // JAX / Orbax.
        {"runs/a/checkpoints/100/_CHECKPOINT_METADATA", "", "jax", 0.95},
        {"runs/a/checkpoints/100/state/_METADATA", "", "jax", 0.95},
        {"runs/a/checkpoints/100/state/manifest.ocdbt", "", "jax", 0.95},
        {"runs/a/checkpoints/100/state/ocdbt.process_0/d/2a4f", "", "jax", 0.95},
        {"runs/a/checkpoints/100/state/_sharding", "", "jax", 0.95},
        {"runs/a/orbax/100/params/d/9f3c", "", "jax", 0.6},
        {"runs/a/ckpt.orbax/100/params/d/9f3c", "", "jax", 0.6},
        // safetensors.
        {"model.safetensors", "", "safetensors", 0.9},
        {"hub/model-00001-of-00004.SAFETENSORS", "", "safetensors", 0.9},
        {"model.safetensors", kSafetensors, "safetensors", 0.97},
        {"weights.bin", kSafetensors, "safetensors", 0.97},
        // Hugging Face layouts.
        {"llama/model.safetensors.index.json", "", "huggingface", 0.92},
        {"llama/pytorch_model.bin.index.json", "", "huggingface", 0.92},
        {"bert/pytorch_model.bin", "", "huggingface", 0.88},
        {"bert/pytorch_model-00002-of-00003.bin", "", "huggingface", 0.88},
        {"bert/tf_model.h5", "", "huggingface", 0.88},
        {"bert/tokenizer.json", "", "huggingface", 0.8},
        {"gpt2/generation_config.json", "", "huggingface", 0.8},
        {"bert/config.json", "", "huggingface", 0.5},
        {"config.json", "", "huggingface", 0.5},
        // A torch zip under a Hugging Face name is first of all PyTorch.
        {"bert/pytorch_model.bin", kTorchZip, "pytorch", 0.97},
    };
    for (const Case& c : cases) {
        SCOPED_TRACE(c.path);
        const auto detection = detect(c.path, c.header);
        ASSERT_TRUE(detection.has_value()) << c.path << " was not recognised";
        EXPECT_EQ(detection->framework, c.framework) << c.path;
        EXPECT_DOUBLE_EQ(detection->confidence, c.confidence) << c.path;
    }
}

TEST_F(FrameworksPack, EveryMatchingRuleFires) {
    // pytorch_model.bin saved as a torch zip: a PyTorch archive and a Hugging
    // Face file name, most confident first.
    const Evaluation evaluation = detect_all("bert/pytorch_model.bin", kTorchZip);
    EXPECT_THAT(ids(evaluation), ElementsAre("pytorch_zip_archive", "huggingface_weights")) << describe(evaluation);
    // saved_model.pb is not also a bare .pb graph.
    EXPECT_THAT(ids(detect_all("export/saved_model.pb", "")), ElementsAre("tensorflow_saved_model"));
    // An HDF5 .h5 file: the signature and the extension.
    EXPECT_THAT(ids(detect_all("model.h5", kHdf5)), ElementsAre("tensorflow_keras_hdf5", "tensorflow_hdf5_extension"));
}

TEST_F(FrameworksPack, PathsThatMatchNothingFireNothing) {
    const std::vector<std::pair<std::string, std::string>> files = {
        {"data/train.csv", ""},
        {"README.md", kText},
        {"images/cat.jpg", "\xff\xd8\xff\xe0\x00\x10JFIF"s},
        {"notes/model.pt.bak", ""},
        {"notes/script.ptx", ""},
        {"weights.bin", ""},  // .bin needs torch markers
        {"weights.bin", kText},
        {"lightning/last.ckpt", ""},  // so does .ckpt
        {"archive.zip", kOtherZip},   // a zip without data.pkl
        {"data.pkl", kPickle4},       // a pickle, but not under a torch extension
        {"myconfig.json", ""},        // not config.json
        {"train/config.yaml", ""},
        {"home/orbaxter/notes.txt", ""},
        {"tokenizer.json.lock", ""},
        {"model.pbtxt", ""},
        {"search.index", "hello"},
        {"", ""},
    };
    for (const auto& [path, header] : files) {
        const Evaluation evaluation = detect_all(path, header);
        EXPECT_TRUE(ids(evaluation).empty()) << "'" << path << "': " << describe(evaluation);
        EXPECT_TRUE(evaluation.errors.empty()) << "'" << path << "': " << describe(evaluation);
    }
}

TEST_F(FrameworksPack, WithoutAHeaderPathRulesStillWorkAndHeaderRulesSaySoInErrors) {
    const Evaluation evaluation = detect_all("ckpt/model.pt", std::nullopt);
    EXPECT_THAT(ids(evaluation), ElementsAre("pytorch_extension")) << describe(evaluation);
    ASSERT_FALSE(evaluation.errors.empty());
    for (const RuleError& error : evaluation.errors) EXPECT_THAT(error.message, HasSubstr("'header'")) << error.rule;
    // And a path that matches nothing still fires nothing.
    EXPECT_TRUE(ids(detect_all("data/train.csv", std::nullopt)).empty());
}

TEST_F(FrameworksPack, ExplainShowsWhyARuleDidNotFire) {
    Context context = engine_.context();
    context.set("path", Value("weights.bin"));
    context.set("header", Value(kText));
    const auto steps = engine_.explain("pytorch_pickle", context);
    ASSERT_FALSE(steps.empty());
    EXPECT_EQ(steps[0].value, "false");
    bool saw_extension = false;
    for (const ExplainStep& step : steps)
        saw_extension = saw_extension || step.text.find("[.](pt|pth|bin") != std::string::npos;
    EXPECT_TRUE(saw_extension);
}

// One engine detects file after file: each file gets its answer, even when
// the one before matched the same rule.
TEST_F(FrameworksPack, DetectsEveryFileOfARun) {
    Context context = engine_.context();
    context.set("header", Value(""));
    const std::vector<std::pair<std::string, std::string>> run = {
        {"a/model.pt", "pytorch_extension"},
        {"b/model.pt", "pytorch_extension"},
        {"c/x.safetensors", "safetensors_extension"},
        {"d/y.safetensors", "safetensors_extension"},
        {"e/z.pt", "pytorch_extension"},
    };
    double now = 0;
    for (const auto& [path, rule] : run) {
        context.set("path", Value(path));
        const Evaluation evaluation = engine_.evaluate(context, now += 1);
        EXPECT_THAT(ids(evaluation), ElementsAre(rule)) << path;
    }
}

}  // namespace
}  // namespace cohort::test
