// The GPU rule pack as a TransferPolicy: GpuMonitor::io_advice per transfer.
#include <cohort/gpu_monitor.hpp>
#include <cohort/transfers.hpp>

namespace cohort {

TransferPolicy monitor_policy(GpuMonitor& monitor) {
    return [&monitor](const TransferFacts& facts) {
        const IoAdvice advice = monitor.io_advice(IoTransfer{facts.bytes, facts.kind, facts.priority, facts.prefetch});
        std::vector<PolicyAction> out;
        out.reserve(advice.actions.size());
        for (const IoAction& action : advice.actions) {
            PolicyAction a;
            a.rule = action.rule;
            a.type = action.type;
            a.category = action.category;
            a.factor = action.factor;
            a.delay_seconds = action.delay_seconds;
            a.values = advice.values;
            out.push_back(std::move(a));
        }
        return out;
    };
}

}  // namespace cohort
