// The GPU half of the inventory: the commands the agent asks for its GPUs and the parsing of what
// they print, kept apart from running them so that recorded outputs of real machines are tested
// (tests/agent/testdata/). Private to agent/.
//
// Parsing never fails: a line or card that cannot be read is skipped or left partly empty, and
// each such problem is returned, so the agent logs it instead of silently reporting fewer GPUs.
// Thread safety: pure functions; SystemCommandRunner() may be called from any thread.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "ladder/agent/inventory.h"

namespace ladder::agent {

struct GpuQueryResult {
  std::vector<GpuInfo> gpus;
  std::vector<std::string> problems;  // one sentence each, naming the line or card
};

// `nvidia-smi --query-gpu=name,uuid,memory.total,driver_version,compute_cap
// --format=csv,noheader,nounits`: one GPU per line, memory in MiB, compute capability "9.0".
std::vector<std::string> NvidiaSmiCommand();
GpuQueryResult ParseNvidiaSmi(std::string_view output);

// `rocm-smi --showproductname --showuniqueid --showmeminfo vram --json`: one object per
// "cardN". JSON rather than --csv because rocm-smi deletes commas inside CSV values but the key
// names and their capitalisation change between ROCm releases ("Card series" in 5.x, "Card
// Series" in 6.x), which JSON lets us match by name. VRAM is in bytes.
std::vector<std::string> RocmSmiCommand();
GpuQueryResult ParseRocmSmi(std::string_view output);

// How the GPUs are connected, in the tool's own device indices (a < b, each pair once).
struct GpuTopologyResult {
  std::vector<GpuLink> links;
  std::vector<std::string> problems;  // one sentence each
};

// `nvidia-smi topo -m`: a matrix with a row and a column per GPU ("GPU0", ...), then NIC columns
// and CPU/NUMA affinity; cells " X " on the diagonal, else NV# / PIX / PXB / PHB / NODE / SYS.
// Tab-separated, the header wrapped in terminal underline codes even when piped.
std::vector<std::string> NvidiaTopologyCommand();
GpuTopologyResult ParseNvidiaTopology(std::string_view output);

// `rocm-smi --showtopo`: sections of GPU x GPU matrices ("Weight", "Hops", "Link Type between
// two GPUs"); the link type section gives XGMI or PCIE per pair, 0 on the diagonal.
std::vector<std::string> RocmTopologyCommand();
GpuTopologyResult ParseRocmTopology(std::string_view output);

// Runs argv (no shell) and returns its stdout; nullopt when the program is not installed, cannot
// start or exits non-zero.
using CommandRunner =
    std::function<std::optional<std::string>(const std::vector<std::string>& argv)>;

// Looks argv[0] up in PATH and in the vendors' usual folders (/usr/bin, /usr/local/bin,
// /opt/rocm/bin), since agents started by systemd or cloud-init often have a minimal PATH.
CommandRunner SystemCommandRunner();

// Asks nvidia-smi, then rocm-smi, through `run`; NVIDIA GPUs first.
GpuQueryResult QueryGpus(const CommandRunner& run);

// Asks each vendor's tool for the topology of `gpus` (QueryGpus' list) when it has two or more
// of that vendor's GPUs; links are positions in `gpus`. A link naming a GPU beyond the list is
// dropped with a problem.
GpuTopologyResult QueryTopology(const CommandRunner& run, const std::vector<GpuInfo>& gpus);

}  // namespace ladder::agent
