// torchrun's MASTER_ADDR and MASTER_PORT for a job of several launchers:
// rank 0's launcher picks a free port and publishes it, with an address the
// other launchers can reach, in the coordinator's store of the world's
// generation; every launcher reads it back before starting its workers.
// The store is scoped to the job and the generation, so a new world never
// sees the port (and torch's TCPStore) of an old one.
#pragma once

#include <cohort/coordinator_client.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace cohort_run {

struct MasterAddress {
    std::string addr;
    uint16_t port = 0;
};

// The store key the address is published under.
inline constexpr std::string_view kMasterKey = "cohort-run/master";

// The address other machines reach this one at: `override` when given
// (--master-addr), else this machine's address on the route to `host` (the
// coordinator; 127.0.0.1 when it is on this machine), else loopback.
std::string advertised_address(const std::string& override_addr, const std::string& host);

// A TCP port nothing listens on now, on any address. Throws Error(io).
uint16_t free_port();

void publish_master(cohort::CoordinatorClient& client, std::string_view job, uint64_t generation,
                    const MasterAddress& master);
// The address once published; nullopt before. Throws Error(mismatch) when
// the generation is over, Error(parse) for a value that is not one of ours.
std::optional<MasterAddress> read_master(cohort::CoordinatorClient& client, std::string_view job, uint64_t generation);

}  // namespace cohort_run
