// deploy/: the systemd unit, cloud-init user data, SkyPilot task and Slurm script parse, say
// what docs/deploy.md says they do, and keep the join token off every command line.
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <yaml-cpp/yaml.h>

namespace {

const std::string kDir = LADDER_DEPLOY_DIR;
const std::string kUnit = kDir + "/systemd/ladder-agent.service";
const std::string kCloudInit = kDir + "/cloud-init/user-data.yaml";
const std::string kSkyPilot = kDir + "/skypilot/ladder-agent.yaml";
const std::string kSlurm = kDir + "/slurm/ladder-agent.sbatch";
const std::string kK8sCoordinator = kDir + "/kubernetes/coordinator.yaml";
const std::string kK8sBundle = kDir + "/kubernetes/bundle.yaml";
const std::string kK8sAgents[] = {kDir + "/kubernetes/agent-nvidia.yaml",
                                  kDir + "/kubernetes/agent-amd.yaml"};

std::string Read(const std::string& path) {
  std::ifstream in(path);
  EXPECT_TRUE(in.good()) << path;
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// A unit file as section -> key -> values (a key may repeat).
using Ini = std::map<std::string, std::multimap<std::string, std::string>>;
Ini ParseUnit(const std::string& text) {
  Ini ini;
  std::string section;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#' || line[0] == ';') continue;
    if (line.front() == '[') {
      section = line.substr(1, line.find(']') - 1);
      continue;
    }
    const size_t eq = line.find('=');
    if (eq == std::string::npos) continue;
    ini[section].emplace(line.substr(0, eq), line.substr(eq + 1));
  }
  return ini;
}

std::string One(const Ini& ini, const std::string& section, const std::string& key) {
  auto s = ini.find(section);
  if (s == ini.end()) return "";
  auto k = s->second.find(key);
  return k == s->second.end() ? "" : k->second;
}

// Lines that run the agent must pass the token by file only.
void ExpectNoTokenOnCommandLine(const std::string& text, const std::string& what) {
  static const std::regex kTokenFlag(R"((^|\s)--(join-)?token(\s|=))");
  std::istringstream in(text);
  std::string line;
  int n = 0;
  while (std::getline(in, line)) {
    ++n;
    EXPECT_FALSE(std::regex_search(line, kTokenFlag))
        << what << ":" << n << " passes a token on a command line: " << line;
  }
}

int RunShell(const std::string& command) {
  const int status = std::system(command.c_str());
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

std::string WriteTemp(const std::string& name, const std::string& text) {
  const auto dir =
      std::filesystem::temp_directory_path() / ("ladder-deploy-test-" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  const auto path = dir / name;
  std::ofstream(path) << text;
  return path.string();
}

bool BashSyntaxOk(const std::string& script, const std::string& name) {
  return RunShell("bash -n '" + WriteTemp(name, script) + "'") == 0;
}

TEST(Systemd, UnitHasRestartCredentialAndStateDirectory) {
  const Ini unit = ParseUnit(Read(kUnit));
  EXPECT_EQ(One(unit, "Service", "Restart"), "on-failure");
  EXPECT_EQ(One(unit, "Service", "LoadCredential"), "ladder-token:/etc/ladder/ladder-token");
  EXPECT_EQ(One(unit, "Service", "StateDirectory"), "ladder");
  EXPECT_EQ(One(unit, "Install", "WantedBy"), "multi-user.target");
  const std::string exec = One(unit, "Service", "ExecStart");
  EXPECT_NE(exec.find(" agent "), std::string::npos) << exec;
  EXPECT_NE(exec.find("--token-file ${CREDENTIALS_DIRECTORY}/ladder-token"), std::string::npos)
      << exec;
  EXPECT_NE(exec.find("--spool /var/lib/ladder/spool.db"), std::string::npos) << exec;
  EXPECT_NE(exec.find("--coordinator ${LADDER_COORDINATOR}"), std::string::npos) << exec;
  EXPECT_NE(exec.find("--tls-ca "), std::string::npos) << exec;
  // The token is never in the environment either.
  EXPECT_EQ(One(unit, "Service", "Environment").find("TOKEN"), std::string::npos);
}

TEST(Systemd, SystemdAnalyzeVerify) {
  if (RunShell("command -v systemd-analyze >/dev/null 2>&1") != 0) {
    GTEST_SKIP() << "systemd-analyze is not installed";
  }
  // verify checks that ExecStart's program exists; point it at one that does.
  std::string text = Read(kUnit);
  text = std::regex_replace(text, std::regex("/usr/local/bin/ladder"), "/bin/true");
  const std::string path = WriteTemp("ladder-agent.service", text);
  const std::string log = path + ".log";
  const int rc = RunShell("systemd-analyze verify '" + path + "' >'" + log + "' 2>&1");
  const std::string out = Read(log);
  EXPECT_EQ(rc, 0) << out;
  // Unknown keys and bad values are warnings with exit 0 on some versions: none allowed.
  EXPECT_EQ(out.find("ladder-agent.service:"), std::string::npos) << out;
}

TEST(CloudInit, ParsesAndInstallsTheSameUnit) {
  const std::string text = Read(kCloudInit);
  ASSERT_EQ(text.rfind("#cloud-config\n", 0), 0u) << "user data must start with #cloud-config";
  YAML::Node doc = YAML::Load(text);
  ASSERT_TRUE(doc.IsMap());
  ASSERT_TRUE(doc["write_files"].IsSequence());
  std::map<std::string, YAML::Node> files;
  for (const auto& f : doc["write_files"]) files[f["path"].as<std::string>()] = YAML::Node(f);

  ASSERT_TRUE(files.count("/etc/systemd/system/ladder-agent.service"));
  EXPECT_EQ(files["/etc/systemd/system/ladder-agent.service"]["content"].as<std::string>(),
            Read(kUnit))
      << "the unit embedded in user-data.yaml must equal deploy/systemd/ladder-agent.service";

  ASSERT_TRUE(files.count("/etc/ladder/ladder-token"));
  EXPECT_EQ(files["/etc/ladder/ladder-token"]["permissions"].as<std::string>(), "0600");
  ASSERT_TRUE(files.count("/etc/ladder/agent.env"));
  EXPECT_NE(files["/etc/ladder/agent.env"]["content"].as<std::string>().find("LADDER_COORDINATOR="),
            std::string::npos);
  ASSERT_TRUE(files.count("/usr/local/sbin/ladder-install"));
  EXPECT_TRUE(BashSyntaxOk(files["/usr/local/sbin/ladder-install"]["content"].as<std::string>(),
                           "ladder-install"));

  ASSERT_TRUE(doc["runcmd"].IsSequence());
  bool enables = false;
  for (const auto& cmd : doc["runcmd"]) {
    std::string line;
    if (cmd.IsSequence()) {
      for (const auto& word : cmd) line += word.as<std::string>() + " ";
    } else {
      line = cmd.as<std::string>();
    }
    if (line.find("enable --now ladder-agent") != std::string::npos) enables = true;
  }
  EXPECT_TRUE(enables) << "runcmd must enable and start ladder-agent.service";
  ExpectNoTokenOnCommandLine(text, "user-data.yaml");
}

TEST(SkyPilot, TaskStartsAgentWithTokenFromSecret) {
  const std::string text = Read(kSkyPilot);
  YAML::Node task = YAML::Load(text);
  ASSERT_TRUE(task.IsMap());
  EXPECT_EQ(task["name"].as<std::string>(), "ladder-agent");
  ASSERT_TRUE(task["resources"]["accelerators"]);
  ASSERT_TRUE(task["envs"].IsMap());
  EXPECT_TRUE(task["envs"]["LADDER_COORDINATOR"]);
  ASSERT_TRUE(task["secrets"].IsMap());
  ASSERT_TRUE(task["secrets"]["LADDER_TOKEN"]);
  EXPECT_TRUE(task["secrets"]["LADDER_TOKEN"].IsNull())
      << "the token's value must come from --secret, never from the file";
  EXPECT_FALSE(task["envs"]["LADDER_TOKEN"]) << "the token is a secret, not an env";
  const std::string run = task["run"].as<std::string>();
  EXPECT_NE(run.find("ladder agent"), std::string::npos) << run;
  EXPECT_NE(run.find("--token-file"), std::string::npos);
  EXPECT_NE(run.find("--spool"), std::string::npos);
  EXPECT_NE(run.find("--tls-ca"), std::string::npos);
  EXPECT_NE(run.find("umask 077"), std::string::npos) << "the token file must be private";
  EXPECT_TRUE(BashSyntaxOk(run, "skypilot-run.sh"));
  EXPECT_TRUE(BashSyntaxOk(task["setup"].as<std::string>(), "skypilot-setup.sh"));
  ExpectNoTokenOnCommandLine(text, "ladder-agent.yaml");
}

TEST(SkyPilot, SetupInstallsTheCheckedBundleAndBuildsNothing) {
  YAML::Node task = YAML::Load(Read(kSkyPilot));
  const std::string setup = task["setup"].as<std::string>();
  EXPECT_EQ(setup.find("cmake"), std::string::npos) << "no build on a paid GPU VM:\n" << setup;
  EXPECT_EQ(setup.find("setup-debian.sh"), std::string::npos) << setup;
  EXPECT_NE(setup.find("sha256sum -c"), std::string::npos) << "the bundle must be checked";
  EXPECT_FALSE(task["workdir"]) << "the source tree is not needed on the VM";
  ASSERT_TRUE(task["file_mounts"].IsMap());
  EXPECT_EQ(task["file_mounts"]["~/.ladder/dist"].as<std::string>(), "./dist");
  EXPECT_TRUE(task["envs"]["LADDER_BUNDLE_URL"]);
  EXPECT_TRUE(task["envs"]["LADDER_BUNDLE_SHA256"]);
}

TEST(CloudInit, InstallsTheBundleCheckedAgainstItsSha256) {
  YAML::Node doc = YAML::Load(Read(kCloudInit));
  std::string install, env;
  for (const auto& f : doc["write_files"]) {
    if (f["path"].as<std::string>() == "/usr/local/sbin/ladder-install") {
      install = f["content"].as<std::string>();
    }
    if (f["path"].as<std::string>() == "/etc/ladder/agent.env")
      env = f["content"].as<std::string>();
  }
  EXPECT_NE(env.find("LADDER_BUNDLE_URL="), std::string::npos) << env;
  EXPECT_NE(env.find("LADDER_BUNDLE_SHA256="), std::string::npos) << env;
  // The download's own checksum comes first, then the bundle's per-file SHA256SUMS.
  const size_t download = install.find("sha256sum -c -");
  const size_t unpack = install.find("tar -xzf");
  ASSERT_NE(download, std::string::npos) << install;
  ASSERT_NE(unpack, std::string::npos) << install;
  EXPECT_LT(download, unpack) << "check before unpacking";
  EXPECT_NE(install.find("sha256sum -c --quiet SHA256SUMS"), std::string::npos) << install;
}

TEST(CloudInit, CloudInitSchema) {
  if (RunShell("command -v cloud-init >/dev/null 2>&1") != 0) {
    GTEST_SKIP() << "cloud-init is not installed";
  }
  const std::string log = WriteTemp("cloud-init-schema.log", "");
  const int rc =
      RunShell("cloud-init schema --config-file '" + kCloudInit + "' >'" + log + "' 2>&1");
  EXPECT_EQ(rc, 0) << Read(log);
}

TEST(Slurm, BatchScriptIsValidBash) {
  const std::string text = Read(kSlurm);
  EXPECT_EQ(RunShell("bash -n '" + kSlurm + "'"), 0);
  EXPECT_NE(text.find("#SBATCH --gres=gpu:"), std::string::npos);
  EXPECT_NE(text.find("#SBATCH --signal=B:TERM@"), std::string::npos)
      << "the agent needs SIGTERM before the time limit to hand back its lease";
  EXPECT_NE(text.find("--token-file \"$token_file\""), std::string::npos);
  EXPECT_NE(text.find("agent \\"), std::string::npos);
  // #SBATCH lines must come before the first command, or sbatch ignores them.
  std::istringstream in(text);
  std::string line;
  bool command_seen = false;
  while (std::getline(in, line)) {
    if (line.rfind("#SBATCH", 0) == 0) {
      EXPECT_FALSE(command_seen) << "#SBATCH after a command is ignored: " << line;
    } else if (!line.empty() && line[0] != '#') {
      command_seen = true;
    }
  }
  ExpectNoTokenOnCommandLine(text, "ladder-agent.sbatch");
}

// Kubernetes: the manifests' documents by kind.
std::map<std::string, YAML::Node> K8sDocuments(const std::string& path) {
  std::map<std::string, YAML::Node> by_kind;
  for (const YAML::Node& doc : YAML::LoadAllFromFile(path)) {
    EXPECT_TRUE(doc["apiVersion"]) << path;
    EXPECT_TRUE(doc["metadata"]["name"]) << path;
    by_kind[doc["kind"].as<std::string>()] = doc;
  }
  return by_kind;
}

std::vector<std::string> Strings(const YAML::Node& list) {
  std::vector<std::string> out;
  for (const auto& item : list) out.push_back(item.as<std::string>());
  return out;
}

// The value after `flag` in a container's args ("" when absent).
std::string FlagValue(const YAML::Node& container, const std::string& flag) {
  const std::vector<std::string> args = Strings(container["args"]);
  for (size_t i = 0; i + 1 < args.size(); ++i) {
    if (args[i] == flag) return args[i + 1];
  }
  return "";
}

// The volume mounted at the folder holding `file` in `container`, looked up in `pod`.
YAML::Node VolumeHolding(const YAML::Node& pod, const YAML::Node& container,
                         const std::string& file) {
  for (const auto& mount : container["volumeMounts"]) {
    const std::string at = mount["mountPath"].as<std::string>();
    if (file.rfind(at + "/", 0) == 0) {
      for (const auto& volume : pod["volumes"]) {
        if (volume["name"].as<std::string>() == mount["name"].as<std::string>()) return volume;
      }
    }
  }
  return YAML::Node();
}

// The init container installs the bundle as cloud-init does: the download's sha256 first.
void ExpectCheckedInstall(const YAML::Node& pod, const std::string& what) {
  ASSERT_TRUE(pod["initContainers"].IsSequence()) << what;
  const YAML::Node init = pod["initContainers"][0];
  const std::string script = Strings(init["args"]).at(0);
  const size_t check = script.find("sha256sum -c -");
  const size_t unpack = script.find("tar -xzf");
  ASSERT_NE(check, std::string::npos) << what << ":\n" << script;
  ASSERT_NE(unpack, std::string::npos) << what << ":\n" << script;
  EXPECT_LT(check, unpack) << what << ": check before unpacking";
  EXPECT_NE(script.find("SHA256SUMS"), std::string::npos) << what;
}

TEST(Kubernetes, CoordinatorIsOneReplicaWithItsDatabaseOnAPersistentVolumeAndTls) {
  auto docs = K8sDocuments(kK8sCoordinator);
  ASSERT_TRUE(docs.count("Deployment") && docs.count("Service") &&
              docs.count("PersistentVolumeClaim"));
  const YAML::Node deployment = docs["Deployment"];
  EXPECT_EQ(deployment["spec"]["replicas"].as<int>(), 1) << "one writer of results.db";
  EXPECT_EQ(deployment["spec"]["strategy"]["type"].as<std::string>(), "Recreate")
      << "a rolling update would run two coordinators on one database";
  const YAML::Node pod = deployment["spec"]["template"]["spec"];
  const YAML::Node container = pod["containers"][0];
  EXPECT_EQ(Strings(container["args"]).at(0), "coordinator");
  EXPECT_EQ(FlagValue(container, "--listen"), "0.0.0.0:7400");
  const YAML::Node db = VolumeHolding(pod, container, FlagValue(container, "--db"));
  ASSERT_TRUE(db) << "--db must be on a mounted volume";
  EXPECT_EQ(db["persistentVolumeClaim"]["claimName"].as<std::string>(),
            docs["PersistentVolumeClaim"]["metadata"]["name"].as<std::string>());
  EXPECT_EQ(Strings(docs["PersistentVolumeClaim"]["spec"]["accessModes"]),
            std::vector<std::string>{"ReadWriteOnce"});
  for (const char* flag : {"--tls-cert", "--tls-key"}) {
    const YAML::Node tls = VolumeHolding(pod, container, FlagValue(container, flag));
    ASSERT_TRUE(tls) << flag;
    EXPECT_TRUE(tls["secret"]["secretName"]) << flag << " must come from a Secret";
  }
  const std::vector<std::string> args = Strings(container["args"]);
  EXPECT_EQ(std::find(args.begin(), args.end(), "--insecure"), args.end())
      << "beyond loopback the coordinator needs TLS";
  EXPECT_EQ(docs["Service"]["spec"]["ports"][0]["port"].as<int>(), 7400);
  ExpectCheckedInstall(pod, "coordinator.yaml");
}

TEST(Kubernetes, AgentsRequestOneGpuEachAndReadTheTokenFromASecretFile) {
  const std::map<std::string, std::string> resource = {{kK8sAgents[0], "nvidia.com/gpu"},
                                                       {kK8sAgents[1], "amd.com/gpu"}};
  for (const std::string& path : kK8sAgents) {
    SCOPED_TRACE(path);
    auto docs = K8sDocuments(path);
    ASSERT_TRUE(docs.count("StatefulSet"));
    const YAML::Node set = docs["StatefulSet"];
    const YAML::Node pod = set["spec"]["template"]["spec"];
    const YAML::Node container = pod["containers"][0];
    EXPECT_EQ(Strings(container["args"]).at(0), "agent");
    // One GPU per agent: the device plugin hands each pod its own device.
    EXPECT_EQ(container["resources"]["limits"][resource.at(path)].as<int>(), 1);
    EXPECT_EQ(FlagValue(container, "--gpus"), "")
        << "the container sees only its device; --gpus would index into that";
    EXPECT_EQ(FlagValue(container, "--coordinator"), "ladder-coordinator:7400");
    const YAML::Node token = VolumeHolding(pod, container, FlagValue(container, "--token-file"));
    ASSERT_TRUE(token) << "--token-file must be on a mounted volume";
    EXPECT_EQ(token["secret"]["secretName"].as<std::string>(), "ladder-agent-token");
    EXPECT_EQ(token["secret"]["defaultMode"].as<std::string>(), "0400")
        << "readable by the agent only (YAML octal, as Kubernetes reads it)";
    ASSERT_TRUE(VolumeHolding(pod, container, FlagValue(container, "--tls-ca"))["secret"]);
    for (const auto& env : container["env"]) {
      EXPECT_EQ(env["name"].as<std::string>().find("TOKEN"), std::string::npos)
          << "the token is a file, never an environment variable";
    }
    // The spool on a disk that survives the pod.
    const std::string spool = FlagValue(container, "--spool");
    bool spool_on_claim = false;
    for (const auto& mount : container["volumeMounts"]) {
      for (const auto& claim : set["spec"]["volumeClaimTemplates"]) {
        if (mount["name"].as<std::string>() == claim["metadata"]["name"].as<std::string>() &&
            spool.rfind(mount["mountPath"].as<std::string>() + "/", 0) == 0) {
          spool_on_claim = true;
        }
      }
    }
    EXPECT_TRUE(spool_on_claim) << spool;
    ExpectCheckedInstall(pod, path);
  }
}

TEST(Kubernetes, TheBundleConfigMapHasEveryKeyThePodsRead) {
  auto docs = K8sDocuments(kK8sBundle);
  ASSERT_TRUE(docs.count("ConfigMap"));
  const YAML::Node data = docs["ConfigMap"]["data"];
  std::vector<std::string> manifests = {kK8sCoordinator, kK8sAgents[0], kK8sAgents[1]};
  for (const auto& path : manifests) {
    for (const auto& [kind, doc] : K8sDocuments(path)) {
      if (!doc["spec"]["template"]) continue;
      for (const auto& init : doc["spec"]["template"]["spec"]["initContainers"]) {
        for (const auto& env : init["env"]) {
          const YAML::Node ref = env["valueFrom"]["configMapKeyRef"];
          if (!ref) continue;
          EXPECT_EQ(ref["name"].as<std::string>(), "ladder-bundle") << path;
          EXPECT_TRUE(data[ref["key"].as<std::string>()]) << path << " reads " << ref["key"];
        }
      }
    }
  }
}

TEST(Deploy, NoFileCarriesARealLookingToken) {
  // Placeholders only: a committed token would be a leaked credential.
  for (const auto& entry : std::filesystem::recursive_directory_iterator(kDir)) {
    if (!entry.is_regular_file()) continue;
    const std::string text = Read(entry.path().string());
    EXPECT_FALSE(std::regex_search(text, std::regex("ladder_[A-Za-z0-9]+_[A-Za-z0-9]{8,}")))
        << entry.path();
    ExpectNoTokenOnCommandLine(text, entry.path().filename().string());
  }
}

}  // namespace
