//! `strata-s3-server [--host H] [--port P] [--access-key K --secret-key S] ROOT`:
//! an S3-compatible server over the directory ROOT (each bucket a
//! sub-directory), for strata's object-store tests. The store is s3s-fs's;
//! this binary serves it with `TCP_NODELAY` on every connection, and makes
//! its conditional writes atomic (see `Store`).

use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto::Builder as ConnBuilder;
use s3s::auth::SimpleAuth;
use s3s::dto::*;
use s3s::service::S3ServiceBuilder;
use s3s::{S3, S3Request, S3Response, S3Result};
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
    let mut b = S3ServiceBuilder::new(Store {
        fs,
        writes: tokio::sync::Mutex::new(()),
    });
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

/// s3s-fs's store with its writes of objects one at a time.
///
/// s3s-fs checks a conditional write's precondition (`If-None-Match: *`,
/// `If-Match`) and then writes, so two conditional writes of one object at
/// once could both pass their checks and both succeed; S3 lets exactly one
/// succeed. Holding one lock around every write that replaces or removes an
/// object (put, multipart completion, copy, delete) makes check and write
/// one step, as S3 documents them. Reads and part uploads do not wait.
struct Store {
    fs: FileSystem,
    writes: tokio::sync::Mutex<()>,
}

#[async_trait::async_trait]
impl S3 for Store {
    async fn create_bucket(&self, req: S3Request<CreateBucketInput>) -> S3Result<S3Response<CreateBucketOutput>> {
        let _writes = self.writes.lock().await;
        self.fs.create_bucket(req).await
    }

    async fn copy_object(&self, req: S3Request<CopyObjectInput>) -> S3Result<S3Response<CopyObjectOutput>> {
        let _writes = self.writes.lock().await;
        self.fs.copy_object(req).await
    }

    async fn delete_bucket(&self, req: S3Request<DeleteBucketInput>) -> S3Result<S3Response<DeleteBucketOutput>> {
        let _writes = self.writes.lock().await;
        self.fs.delete_bucket(req).await
    }

    async fn delete_object(&self, req: S3Request<DeleteObjectInput>) -> S3Result<S3Response<DeleteObjectOutput>> {
        let _writes = self.writes.lock().await;
        self.fs.delete_object(req).await
    }

    async fn delete_objects(&self, req: S3Request<DeleteObjectsInput>) -> S3Result<S3Response<DeleteObjectsOutput>> {
        let _writes = self.writes.lock().await;
        self.fs.delete_objects(req).await
    }

    async fn get_bucket_location(&self, req: S3Request<GetBucketLocationInput>) -> S3Result<S3Response<GetBucketLocationOutput>> {
        self.fs.get_bucket_location(req).await
    }

    async fn get_object(&self, req: S3Request<GetObjectInput>) -> S3Result<S3Response<GetObjectOutput>> {
        self.fs.get_object(req).await
    }

    async fn head_bucket(&self, req: S3Request<HeadBucketInput>) -> S3Result<S3Response<HeadBucketOutput>> {
        self.fs.head_bucket(req).await
    }

    async fn head_object(&self, req: S3Request<HeadObjectInput>) -> S3Result<S3Response<HeadObjectOutput>> {
        self.fs.head_object(req).await
    }

    async fn list_buckets(&self, req: S3Request<ListBucketsInput>) -> S3Result<S3Response<ListBucketsOutput>> {
        self.fs.list_buckets(req).await
    }

    async fn list_objects(&self, req: S3Request<ListObjectsInput>) -> S3Result<S3Response<ListObjectsOutput>> {
        self.fs.list_objects(req).await
    }

    async fn list_objects_v2(&self, req: S3Request<ListObjectsV2Input>) -> S3Result<S3Response<ListObjectsV2Output>> {
        self.fs.list_objects_v2(req).await
    }

    async fn put_object(&self, req: S3Request<PutObjectInput>) -> S3Result<S3Response<PutObjectOutput>> {
        let _writes = self.writes.lock().await;
        self.fs.put_object(req).await
    }

    async fn create_multipart_upload(&self, req: S3Request<CreateMultipartUploadInput>) -> S3Result<S3Response<CreateMultipartUploadOutput>> {
        self.fs.create_multipart_upload(req).await
    }

    async fn upload_part(&self, req: S3Request<UploadPartInput>) -> S3Result<S3Response<UploadPartOutput>> {
        self.fs.upload_part(req).await
    }

    async fn upload_part_copy(&self, req: S3Request<UploadPartCopyInput>) -> S3Result<S3Response<UploadPartCopyOutput>> {
        self.fs.upload_part_copy(req).await
    }

    async fn list_parts(&self, req: S3Request<ListPartsInput>) -> S3Result<S3Response<ListPartsOutput>> {
        self.fs.list_parts(req).await
    }

    async fn complete_multipart_upload(&self, req: S3Request<CompleteMultipartUploadInput>) -> S3Result<S3Response<CompleteMultipartUploadOutput>> {
        let _writes = self.writes.lock().await;
        self.fs.complete_multipart_upload(req).await
    }

    async fn abort_multipart_upload(&self, req: S3Request<AbortMultipartUploadInput>) -> S3Result<S3Response<AbortMultipartUploadOutput>> {
        self.fs.abort_multipart_upload(req).await
    }
}
