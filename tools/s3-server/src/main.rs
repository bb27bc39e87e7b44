//! `strata-s3-server [--host H] [--port P] [--access-key K --secret-key S] ROOT`:
//! an S3-compatible server over the directory ROOT (each bucket a
//! sub-directory), for strata's object-store tests. The store is s3s-fs's;
//! this binary only serves it, with `TCP_NODELAY` on every connection.

use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto::Builder as ConnBuilder;
use s3s::auth::SimpleAuth;
use s3s::service::S3ServiceBuilder;
use s3s_fs::FileSystem;
use tokio::net::TcpListener;

fn usage() -> ! {
    eprintln!("usage: strata-s3-server [--host H] [--port P] [--access-key K --secret-key S] ROOT");
    std::process::exit(2)
}

#[tokio::main]
async fn main() {
    let (mut host, mut port, mut ak, mut sk, mut root) = ("127.0.0.1".to_string(), 8014u16, None, None, None);
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        let mut value = || args.next().unwrap_or_else(|| usage());
        match a.as_str() {
            "--host" => host = value(),
            "--port" => port = value().parse().unwrap_or_else(|_| usage()),
            "--access-key" => ak = Some(value()),
            "--secret-key" => sk = Some(value()),
            s if !s.starts_with('-') && root.is_none() => root = Some(s.to_string()),
            _ => usage(),
        }
    }
    let Some(root) = root else { usage() };
    let fs = FileSystem::new(&root).unwrap_or_else(|e| {
        eprintln!("strata-s3-server: {root}: {e:?}");
        std::process::exit(1)
    });
    let mut b = S3ServiceBuilder::new(fs);
    match (ak, sk) {
        (Some(ak), Some(sk)) => b.set_auth(SimpleAuth::from_single(ak, sk)),
        (None, None) => {}
        _ => usage(),
    }
    let service = b.build();
    let listener = TcpListener::bind((host.as_str(), port)).await.unwrap_or_else(|e| {
        eprintln!("strata-s3-server: cannot listen on {host}:{port}: {e}");
        std::process::exit(1)
    });
    let http = ConnBuilder::new(TokioExecutor::new());
    loop {
        let Ok((socket, _)) = listener.accept().await else { continue };
        let _ = socket.set_nodelay(true);
        let conn = http.serve_connection(TokioIo::new(socket), service.clone()).into_owned();
        tokio::spawn(async move {
            let _ = conn.await;
        });
    }
}
