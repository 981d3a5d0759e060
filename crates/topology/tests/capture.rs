//! `scripts/capture-sysfs.sh` copies everything the sysfs reader needs: the capture of this
//! machine reads back as the same machine as `/` itself.

use ptb_topology::sysfs::read_machine;
use std::path::Path;
use std::process::Command;

#[test]
fn capture_of_this_machine_reads_back_the_same() {
    let live = match read_machine(Path::new("/")) {
        Ok(m) => m,
        Err(e) => {
            eprintln!("skipped: this machine's /sys cannot be read here: {e}");
            return;
        }
    };
    let dir = tempfile::tempdir().unwrap();
    let dest = dir.path().join("capture");
    let out = Command::new("bash").arg("../../scripts/capture-sysfs.sh").arg(&dest).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let captured = read_machine(&dest).unwrap();
    assert_eq!(captured.nodes, live.nodes);
    assert_eq!(captured.groups, live.groups);
    assert_eq!(captured.distances, live.distances);
    assert_eq!(captured.name, live.name);
    assert!(live.source.is_live() && !captured.source.is_live());
}
