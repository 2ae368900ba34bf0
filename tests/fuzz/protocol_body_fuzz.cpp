// Every JSON body the coordinator's protocol reads (src/coordinator/
// protocol/): the first byte picks the reader, the rest is the body as the
// routes parse it. Whatever a reader accepts, its writer must write back as
// a body that the same reader accepts again.
#include "fuzz_input.hpp"

#include "coordinator/protocol/descriptor.hpp"
#include "coordinator/protocol/job_settings.hpp"
#include "coordinator/protocol/json_bytes.hpp"
#include "coordinator/protocol/metrics.hpp"
#include "coordinator/protocol/replies.hpp"
#include "coordinator/protocol/requests.hpp"
#include "coordinator/protocol/store.hpp"
#include "coordinator/state/dataset_plan.hpp"
#include "coordinator/state/json_parse.hpp"
#include "coordinator/state/settings.hpp"

#include <cohort/coordinator_protocol.hpp>

namespace {

namespace json = boost::json;
namespace protocol = cohort::coord::protocol;

// read, write, read again: the second read must not fail.
template <class T>
void round_trip(const json::value& body, protocol::ReadAs as) {
    const T first = protocol::read<T>(body, "body", as);
    const json::value written = protocol::write(first);
    try {
        (void)protocol::read<T>(written, "written", as);
    } catch (const cohort::Error& e) {
        cohort::fuzz::defect("protocol: a value read back fails", e.what());
    }
}

void read_body(uint8_t which, const json::value& body) {
    using namespace cohort::coord;
    switch (which % 20) {
        case 0: {
            const cohort::Node node = descriptor_from_json(body, "join");
            (void)descriptor_from_json(descriptor_to_json(node), "written");
            break;
        }
        case 1: (void)settings_from_json(body); break;
        case 2: {
            const DatasetPlan plan = plan_from_json(body);
            (void)plan_from_json(to_json(plan));
            break;
        }
        case 3: round_trip<protocol::MemberRequest>(body, protocol::kRequest); break;
        case 4: round_trip<protocol::LeaveRequest>(body, protocol::kRequest); break;
        case 5: round_trip<protocol::ReportRequest>(body, protocol::kRequest); break;
        case 6: round_trip<protocol::DoneRequest>(body, protocol::kRequest); break;
        case 7: round_trip<protocol::HeartbeatRequest>(body, protocol::kRequest); break;
        case 8: round_trip<protocol::StoreCasRequest>(body, protocol::kRequest); break;
        case 9: round_trip<protocol::StoreWaitRequest>(body, protocol::kRequest); break;
        case 10: round_trip<cohort::JobSettings>(body, protocol::kRequest); break;
        case 11: round_trip<cohort::HeartbeatMetrics>(body, protocol::kArgument); break;
        case 12: (void)protocol::add_request_from_json(body, "add", protocol::kRequest); break;
        case 13: (void)bytes_from_json(body, "value", cohort::Errc::invalid_argument); break;
        // The client reads the coordinator's replies with the same code.
        case 14: {
            const auto world = protocol::read<cohort::MemberWorld>(body, "world", protocol::kReply);
            (void)protocol::read<cohort::MemberWorld>(protocol::write(world, true), "written", protocol::kReply);
            break;
        }
        case 15: round_trip<cohort::ShardLease>(body, protocol::kReply); break;
        case 16: round_trip<cohort::JoinReply>(body, protocol::kReply); break;
        case 17: round_trip<cohort::HeartbeatReply>(body, protocol::kReply); break;
        case 18: round_trip<cohort::StoreCasResult>(body, protocol::kReply); break;
        default: (void)protocol::add_reply_from_json(body, "add", protocol::kReply); break;
    }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, std::size_t size) {
    cohort::fuzz::Input in(data, size);
    const uint8_t which = in.byte();
    const std::string_view text = in.rest();
    cohort::fuzz::expect_named_errors("protocol", [&] { read_body(which, cohort::coord::parse_json(text)); });
    if (which % 20 == 11) {
        cohort::fuzz::expect_named_errors("protocol: metrics text",
                                          [&] { (void)cohort::heartbeat_metrics_from_json_text(text, "metrics"); });
    }
    return 0;
}
