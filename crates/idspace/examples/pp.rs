use idspace::sched::{Builder, Policy};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Poll, Waker};
use std::time::{Duration, Instant};

#[derive(Default)]
struct Bell {
    rung: AtomicU64,
    waiter: Mutex<Option<Waker>>,
}
impl Bell {
    fn ring(&self) {
        self.rung.fetch_add(1, Ordering::SeqCst);
        if let Some(w) = self.waiter.lock().unwrap().take() {
            w.wake();
        }
    }
    async fn until(self: &Arc<Self>, n: u64) {
        std::future::poll_fn(|cx| {
            if self.rung.load(Ordering::SeqCst) >= n {
                return Poll::Ready(());
            }
            *self.waiter.lock().unwrap() = Some(cx.waker().clone());
            if self.rung.load(Ordering::SeqCst) >= n {
                Poll::Ready(())
            } else {
                Poll::Pending
            }
        })
        .await
    }
}

fn main() {
    let poll: u64 = std::env::args().nth(1).map_or(50, |s| s.parse().unwrap());
    for policy in Policy::ALL {
        let rt = Builder::new()
            .workers(2)
            .policy(policy)
            .poll(Duration::from_micros(poll))
            .build()
            .unwrap();
        let (a, b) = (Arc::new(Bell::default()), Arc::new(Bell::default()));
        let (a2, b2) = (a.clone(), b.clone());
        let n = 50_000;
        let t = Instant::now();
        let h1 = rt.spawn(async move {
            for r in 1..=n {
                b.ring();
                a.until(r).await;
            }
        });
        let h2 = rt.spawn(async move {
            for r in 1..=n {
                b2.until(r).await;
                a2.ring();
            }
        });
        h1.join().unwrap();
        h2.join().unwrap();
        let e = t.elapsed();
        println!(
            "{policy}: {:.0} rt/s {:?}",
            n as f64 / e.as_secs_f64(),
            rt.stats()
        );
    }
}
