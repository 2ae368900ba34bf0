// Slurm host lists as $SLURM_JOB_NODELIST gives them: ranges, lists,
// zero padding, several groups, and every malformed list refused with the
// place named.
#include "elastic/slurm/hostlist.hpp"

#include <cohort/error.hpp>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>

namespace cohort::detail {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

TEST(SlurmHostlist, PlainNamesAndCommas) {
    EXPECT_THAT(expand_hostlist("host0"), ElementsAre("host0"));
    EXPECT_THAT(expand_hostlist("a,b,login-1"), ElementsAre("a", "b", "login-1"));
}

TEST(SlurmHostlist, RangesAndListsInBrackets) {
    EXPECT_THAT(expand_hostlist("host[0-2,5]"), ElementsAre("host0", "host1", "host2", "host5"));
    EXPECT_THAT(expand_hostlist("host[7]"), ElementsAre("host7"));
    EXPECT_THAT(expand_hostlist("gpu[1-2],cpu[10-11],login"), ElementsAre("gpu1", "gpu2", "cpu10", "cpu11", "login"));
}

TEST(SlurmHostlist, ZeroPaddingFollowsTheLowBound) {
    EXPECT_THAT(expand_hostlist("n[08-11]"), ElementsAre("n08", "n09", "n10", "n11"));
    EXPECT_THAT(expand_hostlist("n[001,010]"), ElementsAre("n001", "n010"));
    EXPECT_THAT(expand_hostlist("n[98-101]"), ElementsAre("n98", "n99", "n100", "n101"));
}

TEST(SlurmHostlist, SeveralGroupsMultiplyAndSuffixesStay) {
    EXPECT_THAT(expand_hostlist("r[1-2]n[1-2]"), ElementsAre("r1n1", "r1n2", "r2n1", "r2n2"));
    EXPECT_THAT(expand_hostlist("rack[1-2]-ib"), ElementsAre("rack1-ib", "rack2-ib"));
}

TEST(SlurmHostlist, EachNodeOnceInOrder) {
    EXPECT_THAT(expand_hostlist("h[2-3],h[1-2]"), ElementsAre("h2", "h3", "h1"));
}

void expect_error(const std::string& list, const std::string& what) {
    try {
        expand_hostlist(list);
        FAIL() << "'" << list << "' was accepted";
    } catch (const Error& e) {
        EXPECT_EQ(e.code(), Errc::parse);
        EXPECT_THAT(e.what(), HasSubstr("'" + list + "'"));
        EXPECT_THAT(e.what(), HasSubstr(what)) << e.what();
    }
}

TEST(SlurmHostlist, MalformedListsSayWhereAndWhy) {
    expect_error("host[0-2", "'[' without its ']'");
    expect_error("host0-2]", "']' without its '['");
    expect_error("host[[0]]", "'[' inside brackets");
    expect_error("host[3-1]", "runs backwards");
    expect_error("host[a-b]", "not a node number");
    expect_error("host[]", "not a node number");
    expect_error("host[1,]", "not a node number");
    expect_error("a,,b", "empty node name");
    expect_error("", "empty node name");
    expect_error("a b", "space");
    expect_error("n[0-999999]", "too long");
    expect_error("a[0-999]b[0-999]", "more than 100000");
    expect_error("host[0-2", "at character 5");
}

}  // namespace
}  // namespace cohort::detail
