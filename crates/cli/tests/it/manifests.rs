//! The Kubernetes manifests (deploy/k8s), rendered offline as `kubectl apply -k` would send
//! them: the commands they run are commands `horde` accepts, and they pass a security review.

use std::path::Path;
use std::process::Command;

use crate::dist_util::*;

/// The Kustomize base and every overlay, rendered offline as `kubectl apply -k` would send
/// them (`kubectl kustomize`, Debian's kubernetes-client; .ci/run installs it). None where
/// kubectl is missing outside CI; under CI=true that fails.
fn rendered(dir: &str) -> Option<Vec<yaml_rust2::Yaml>> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../deploy/k8s");
    let o = match Command::new("kubectl").arg("kustomize").arg(root.join(dir)).output() {
        Ok(o) => o,
        Err(e) => {
            horde_testkit::skip(&format!("kubectl is missing ({e}; apt-get install kubernetes-client)"));
            return None;
        }
    };
    assert!(o.status.success(), "kubectl kustomize {dir}: {}", String::from_utf8_lossy(&o.stderr));
    Some(yaml_rust2::YamlLoader::load_from_str(&String::from_utf8_lossy(&o.stdout)).unwrap())
}

const OVERLAYS: [&str; 4] = ["base", "overlays/small", "overlays/large", "overlays/emulation"];

fn of_kind<'a>(docs: &'a [yaml_rust2::Yaml], kind: &str) -> Vec<&'a yaml_rust2::Yaml> {
    docs.iter().filter(|d| d["kind"].as_str() == Some(kind)).collect()
}

/// In the base and every overlay, the scenario the controller Job runs (the generated
/// ConfigMap it mounts) is a valid scenario, and the agent and the controller start with flags
/// `horde` accepts.
#[test]
fn the_kubernetes_manifests_run_valid_commands() {
    let mut players = Vec::new();
    for dir in OVERLAYS {
        let Some(docs) = rendered(dir) else { return };
        let job = of_kind(&docs, "Job")[0];
        let spec = &job["spec"]["template"]["spec"];
        let cm_name = spec["volumes"].as_vec().unwrap().iter().find(|v| v["name"].as_str() == Some("scenario")).unwrap()["configMap"]["name"].as_str().unwrap();
        let cm = of_kind(&docs, "ConfigMap")
            .into_iter()
            .find(|c| c["metadata"]["name"].as_str() == Some(cm_name))
            .unwrap_or_else(|| panic!("{dir}: the Job mounts {cm_name}, which is not rendered"));
        let text = cm["data"]["scenario.toml"].as_str().unwrap();
        let sc = horde_model::scenario::Scenario::parse(text, "scenario.toml", Path::new(".")).unwrap_or_else(|e| panic!("{dir}: {e}\n{text}"));
        let sts = of_kind(&docs, "StatefulSet")[0];
        players.push((dir, sc.players, sts["spec"]["replicas"].as_i64().unwrap()));
        // Each container's args, with $(VAR)s filled in, must parse (the agent with a missing
        // credentials directory fails on the credentials, not on a flag).
        let d = tmp("k8s");
        let args = |y: &yaml_rust2::Yaml| -> Vec<String> {
            y["spec"]["template"]["spec"]["containers"][0]["args"].as_vec().unwrap().iter().map(|a| a.as_str().unwrap().to_string()).collect()
        };
        let fill = |a: &str| a.replace("$(POD_IP)", "127.0.0.1").replace("$(POD_NAME)", "horde-agent-0").replace("$(POD_NAMESPACE)", "default");
        let agent: Vec<String> = args(sts)
            .iter()
            .map(|a| fill(a).replace("/credentials", d.join("none").to_str().unwrap()).replace("/var/lib/horde", d.to_str().unwrap()))
            .collect();
        let o = Command::new(HORDE).args(&agent).output().unwrap();
        let e = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{dir}: {agent:?}: {e}");
        assert!(e.contains("horde agent keygen") && !e.contains("unexpected argument"), "{dir}: {e}");
        let sc_path = d.join("scenario.toml");
        std::fs::write(&sc_path, text).unwrap();
        let ctl: Vec<String> = args(job)
            .iter()
            .map(|a| {
                fill(a)
                    .replace("/scenario/scenario.toml", sc_path.to_str().unwrap())
                    .replace("/credentials", d.join("none").to_str().unwrap())
                    .replace("/out/run", d.join("out").to_str().unwrap())
            })
            .collect();
        let o = Command::new(HORDE).args(&ctl).output().unwrap();
        let e = String::from_utf8_lossy(&o.stderr);
        // The DNS name does not resolve here: the controller says so, after every flag parsed.
        assert!(e.contains("resolving horde-agents.default.svc.cluster.local"), "{dir}: {ctl:?}: {e}");
    }
    // The overlays change what they say they change.
    assert_eq!(players, [("base", 8000, 4), ("overlays/small", 1000, 2), ("overlays/large", 160_000, 16), ("overlays/emulation", 8000, 4)]);
}

/// Issue 21: the manifests a Kubernetes security reviewer accepts — every pod non-root with
/// RuntimeDefault seccomp, no service-account token, no privilege escalation, a read-only root,
/// every capability dropped, resource requests and limits, size-limited emptyDirs, a readiness
/// endpoint of its own, and a NetworkPolicy whose every rule names its ports and its peers —
/// in the base and every overlay as rendered. Issue 27: the emulation overlay's agents are the
/// one stated exception (root, NET_ADMIN and SYS_ADMIN added, a writable /run), and nothing
/// else differs.
#[test]
fn the_kubernetes_manifests_pass_a_security_review() {
    use yaml_rust2::Yaml;
    for dir in OVERLAYS {
        let Some(docs) = rendered(dir) else { return };
        let privileged = dir == "overlays/emulation";
        let get = |y: &Yaml, path: &str| -> Yaml { path.split('.').fold(y.clone(), |y, k| y[k].clone()) };
        let mut pods = 0;
        let mut policies = 0;
        for d in &docs {
            let kind = d["kind"].as_str().unwrap_or("");
            if kind == "StatefulSet" || kind == "Job" {
                pods += 1;
                let spec = get(d, "spec.template.spec");
                let name = format!("{dir}: {}", d["metadata"]["name"].as_str().unwrap());
                let exempt = privileged && kind == "StatefulSet";
                assert_eq!(spec["automountServiceAccountToken"].as_bool(), Some(false), "{name}: service-account token mounted");
                let psc = &spec["securityContext"];
                assert_eq!(psc["runAsNonRoot"].as_bool(), Some(!exempt), "{name}: runAsNonRoot");
                assert_eq!(psc["runAsUser"].as_i64().is_some_and(|u| u != 0), !exempt, "{name}: runAsUser");
                assert_eq!(psc["seccompProfile"]["type"].as_str(), Some("RuntimeDefault"), "{name}: seccomp");
                for c in spec["containers"].as_vec().unwrap() {
                    let sc = &c["securityContext"];
                    assert_eq!(sc["allowPrivilegeEscalation"].as_bool(), Some(false), "{name}: escalation");
                    assert_eq!(sc["readOnlyRootFilesystem"].as_bool(), Some(true), "{name}: read-only root");
                    assert_eq!(sc["runAsUser"].as_i64() == Some(0), exempt, "{name}: a container as root");
                    assert!(sc["capabilities"]["drop"].as_vec().is_some_and(|v| v.iter().any(|x| x.as_str() == Some("ALL"))), "{name}: capabilities");
                    let added: Vec<&str> = sc["capabilities"]["add"].as_vec().map_or(vec![], |v| v.iter().filter_map(|x| x.as_str()).collect());
                    assert_eq!(added, if exempt { vec!["NET_ADMIN", "SYS_ADMIN"] } else { vec![] }, "{name}: capabilities added back");
                    for k in ["requests", "limits"] {
                        for r in ["cpu", "memory"] {
                            assert!(!c["resources"][k][r].is_badvalue(), "{name}: resources.{k}.{r}");
                        }
                    }
                    if kind == "StatefulSet" {
                        assert_eq!(c["readinessProbe"]["httpGet"]["path"].as_str(), Some("/ready"), "{name}: readiness on /ready");
                    }
                }
                for v in spec["volumes"].as_vec().unwrap() {
                    if !v["emptyDir"].is_badvalue() {
                        assert!(!v["emptyDir"]["sizeLimit"].is_badvalue(), "{name}: emptyDir {:?} without sizeLimit", v["name"]);
                    }
                }
                if kind == "StatefulSet" {
                    // only the emulation overlay's agents build emulated networks for a controller
                    let args: Vec<&str> = spec["containers"][0]["args"].as_vec().unwrap().iter().filter_map(|a| a.as_str()).collect();
                    assert_eq!(args.contains(&"--emu"), privileged, "{name}: --emu");
                }
                if exempt {
                    let said = d["metadata"]["annotations"]["horde.dev/privileges"].as_str().unwrap_or("");
                    assert!(said.contains("CAP_NET_ADMIN") && said.contains("CAP_SYS_ADMIN"), "{name}: the privileges are stated on the object");
                }
            }
            if kind == "NetworkPolicy" {
                policies += 1;
                // the tunnels between agents' parts of one emulated network: with the emulation overlay only
                let vxlan = d["spec"]["ingress"].as_vec().unwrap().iter().any(|r| {
                    r["ports"].as_vec().is_some_and(|p| p.iter().any(|p| p["port"].as_i64() == Some(4789) && p["protocol"].as_str() == Some("UDP")))
                        && r["from"][0]["podSelector"]["matchLabels"]["app.kubernetes.io/component"].as_str() == Some("agent")
                });
                assert_eq!(vxlan, privileged, "{dir}: UDP 4789 between agents");
                for rule in d["spec"]["ingress"].as_vec().unwrap() {
                    assert!(rule["ports"].as_vec().is_some_and(|p| !p.is_empty()), "{dir}: a rule without ports: {rule:?}");
                    for from in rule["from"].as_vec().unwrap() {
                        assert!(from["podSelector"]["matchLabels"].as_hash().is_some_and(|h| !h.is_empty()), "{dir}: a rule open to every pod: {rule:?}");
                    }
                }
            }
        }
        assert_eq!((pods, policies), (2, 1), "{dir}");
    }
}
