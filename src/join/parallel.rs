//! Work of a join spread over threads: tasks made on the calling thread
//! (from a relation's scan, which need not be `Send`) go through a bounded
//! channel to the workers, whose output reaches the one sink in chunks under
//! a lock.

use parking_lot::Mutex;

use super::JoinSink;
use crate::{Error, Result};

/// Output triples a worker gathers before it takes the sink's lock.
const CHUNK: usize = 4096;

/// Runs `work` on every task with `threads` workers; `work` emits output
/// through the function it is given. The first error (of a task, of `work`
/// or of the sink) is returned once every worker has stopped; workers stop
/// taking tasks after an error of their own.
pub(crate) fn run<T: Send>(
    tasks: impl Iterator<Item = Result<T>>,
    threads: usize,
    sink: &mut dyn JoinSink,
    work: impl Fn(T, &mut dyn FnMut(u64, u64, u64) -> Result<()>) -> Result<()> + Sync,
) -> Result<()> {
    let sink = Mutex::new(sink);
    let (tx, rx) = crossbeam_channel::bounded::<T>(threads.max(1));
    std::thread::scope(|s| {
        let mut workers = Vec::with_capacity(threads);
        for _ in 0..threads.max(1) {
            let rx = rx.clone();
            let (sink, work) = (&sink, &work);
            workers.push(s.spawn(move || -> Result<()> {
                let mut buf: Vec<(u64, u64, u64)> = Vec::with_capacity(CHUNK);
                let flush = |buf: &mut Vec<(u64, u64, u64)>| -> Result<()> {
                    let mut g = sink.lock();
                    for &(k, o, i) in buf.iter() {
                        g.emit(k, o, i)?;
                    }
                    buf.clear();
                    Ok(())
                };
                for t in rx.iter() {
                    work(t, &mut |k, o, i| {
                        buf.push((k, o, i));
                        if buf.len() >= CHUNK {
                            flush(&mut buf)?;
                        }
                        Ok(())
                    })?;
                    flush(&mut buf)?;
                }
                Ok(())
            }));
        }
        drop(rx);
        let mut first: Option<Error> = None;
        for t in tasks {
            match t {
                Ok(t) => {
                    if tx.send(t).is_err() {
                        break;
                    }
                }
                Err(e) => {
                    first = Some(e);
                    break;
                }
            }
        }
        drop(tx);
        for w in workers {
            let r = w
                .join()
                .unwrap_or_else(|_| Err(Error::invalid("a join worker panicked")));
            if let (Err(e), None) = (r, &first) {
                first = Some(e);
            }
        }
        first.map_or(Ok(()), Err)
    })
}
