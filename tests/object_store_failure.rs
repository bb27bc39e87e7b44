//! Failures at the object store (issue 22): a server stopped in the middle
//! of a run of lookups gives errors, never a wrong answer, and lookups are
//! right again once it is back; a wrong secret is refused without printing
//! it. One test in its own binary: it starts, stops and restarts its own
//! server and changes the environment.
#![cfg(feature = "s3")]

mod common;

use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use common::s3::{self, ACCESS_KEY, SECRET_KEY};
use strata::Error;
use strata::index::{BuildOptions, OpenOptions, Residency};

#[test]
fn a_stopped_server_gives_errors_never_wrong_answers() {
    let mut server = s3::Server::start();
    // SAFETY: the only test of this binary; no other thread runs yet.
    unsafe {
        server.export();
        std::env::set_var("STRATA_S3_RETRIES", "1");
        std::env::set_var("STRATA_S3_TIMEOUT_MS", "2000");
    }
    let url = s3::fresh("failure");
    let keys: Vec<u64> = (0..80_000u64).map(|i| i * 16 + (i % 13)).collect();
    strata::registry::build(
        &"pgm-disk".parse().unwrap(),
        &keys,
        Path::new(&url),
        &BuildOptions::default(),
    )
    .unwrap();
    let opts = OpenOptions {
        resident: Residency::None,
        ..OpenOptions::default()
    };
    let idx = strata::registry::open(Path::new(&url), &opts).unwrap();

    // Lookups run on one thread while the server is killed under them.
    let (stop, done) = (AtomicBool::new(false), AtomicU64::new(0));
    let (right, errors) = std::thread::scope(|s| {
        let looker = s.spawn(|| {
            let (mut right, mut errors) = (0u64, 0u64);
            let mut i = 0usize;
            while !stop.load(Ordering::Relaxed) {
                i = (i + 7919) % keys.len();
                let (k, absent) = (keys[i], keys[i] + 1);
                match idx.get(k) {
                    Ok(v) => {
                        assert_eq!(v, Some(i as u64), "wrong answer for {k}");
                        right += 1;
                    }
                    Err(e) => {
                        assert!(!e.to_string().contains(SECRET_KEY), "{e}");
                        errors += 1;
                    }
                }
                if let Ok(v) = idx.get(absent) {
                    let want = keys.binary_search(&absent).ok().map(|r| r as u64);
                    assert_eq!(v, want, "wrong answer for {absent}");
                }
                done.fetch_add(1, Ordering::Relaxed);
            }
            (right, errors)
        });
        while done.load(Ordering::Relaxed) < 200 {
            std::thread::yield_now();
        }
        server.stop();
        let at = done.load(Ordering::Relaxed);
        while done.load(Ordering::Relaxed) < at + 20 {
            std::thread::yield_now();
        }
        stop.store(true, Ordering::Relaxed);
        looker.join().unwrap()
    });
    assert!(right >= 200, "{right} right answers before the stop");
    assert!(errors >= 20, "{errors} errors after the stop");
    // Batched lookups fail as a whole.
    let mut out = Vec::new();
    assert!(idx.get_many(&keys[..100], &mut out).is_err());
    // A new index cannot be opened either, and says why.
    let e = strata::registry::open(Path::new(&url), &opts).err().unwrap();
    assert!(matches!(e, Error::Io { .. }), "{e}");
    assert!(e.to_string().contains(&url), "{e}");

    // A wrong secret is refused, and neither secret is printed.
    let server = s3::Server::start();
    // SAFETY: as above, no other thread.
    unsafe {
        server.export();
        std::env::set_var("AWS_SECRET_ACCESS_KEY", "wrong-secret-51d0");
    }
    let e = strata::registry::build(
        &"pgm".parse().unwrap(),
        &keys,
        Path::new(&url),
        &BuildOptions::default(),
    )
    .unwrap_err();
    let text = format!("{e} {e:?}");
    for secret in [SECRET_KEY, "wrong-secret-51d0", ACCESS_KEY] {
        assert!(!text.contains(secret), "{text}");
    }
}
