//! The HTTP API against real `idspace-serve` processes on loopback and a throwaway
//! PostgreSQL, on both runtimes: the routes, the named errors, malformed requests, a
//! half-closing client, a slow reader, many idle connections, and a graceful stop that parks
//! the lease's tail.

mod common;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use common::{duplicates, serve, shared_url, space_at, within, Client};

/// Every route answers as documented, on `runtime`.
fn routes(runtime: &'static str) {
    let url = shared_url();
    let (orders, tiny, made) = (
        format!("orders-{runtime}"),
        format!("tiny-{runtime}"),
        format!("made-{runtime}"),
    );
    space_at(&url, &orders, 1_000_000_000);
    space_at(&url, &tiny, 3);
    let token = std::env::temp_dir().join(format!("idspace-serve-token-{}", std::process::id()));
    std::fs::write(&token, "s3cret\n").unwrap();
    let node = serve(
        &url,
        &[
            "--runtime",
            runtime,
            "--admin-token-file",
            token.to_str().unwrap(),
        ],
    );
    let mut client = node.client();
    let mut ids = Vec::new();

    let one = client.get(&format!("/api/segment/get/{orders}"), "");
    assert_eq!(one.status, 200, "{}", one.text());
    assert!(one
        .header("content-type")
        .unwrap()
        .starts_with("text/plain"));
    ids.push(
        one.text()
            .parse::<u64>()
            .expect("Leaf's contract: the ID alone"),
    );

    let lines = client.get(&format!("/v1/spaces/{orders}/ids?count=100"), "");
    assert_eq!(lines.status, 200);
    ids.extend(lines.text().lines().map(|l| l.parse::<u64>().unwrap()));
    let json = client.get(
        &format!("/v1/spaces/{orders}/ids?count=50"),
        "Accept: application/json\r\n",
    );
    assert_eq!(json.header("content-type"), Some("application/json"));
    let array: Vec<u64> = serde_json::from_slice(&json.body).unwrap();
    ids.extend(array);
    assert_eq!(ids.len(), 151);
    assert_eq!(duplicates(&ids), 0);

    // The named errors.
    let unknown = client.get("/api/segment/get/nope", "");
    assert_eq!(
        (unknown.status, unknown.code().as_str()),
        (404, "unknown_space")
    );
    assert_eq!(
        client
            .get(&format!("/v1/spaces/{tiny}/ids?count=3"), "")
            .status,
        200
    );
    let exhausted = client.get(&format!("/v1/spaces/{tiny}/ids"), "");
    assert_eq!(
        (exhausted.status, exhausted.code().as_str()),
        (409, "exhausted")
    );
    for bad in ["0", "10001", "-1", "x", "99999999999999999999999"] {
        let response = client.get(&format!("/v1/spaces/{orders}/ids?count={bad}"), "");
        assert_eq!(
            (response.status, response.code().as_str()),
            (400, "bad_count"),
            "{bad}"
        );
    }

    // Admin: a token, then the space serves at once.
    let body = format!(r#"{{"name":"{made}","min":5,"max":1000,"cyclic":false}}"#);
    let body = body.as_str();
    let anonymous = client.post("/v1/spaces", "", body);
    assert_eq!(
        (anonymous.status, anonymous.code().as_str()),
        (401, "unauthorized")
    );
    assert_eq!(anonymous.header("www-authenticate"), Some("Bearer"));
    let wrong = client.post("/v1/spaces", "Authorization: Bearer nope\r\n", body);
    assert_eq!(wrong.status, 401);
    let created = client.post("/v1/spaces", "Authorization: Bearer s3cret\r\n", body);
    assert_eq!(created.status, 201, "{}", created.text());
    let again = client.post("/v1/spaces", "Authorization: Bearer s3cret\r\n", body);
    assert_eq!((again.status, again.code().as_str()), (409, "space_exists"));
    // The scheme's name is case-insensitive (RFC 9110 11.1).
    let again = client.post("/v1/spaces", "Authorization: bearer s3cret\r\n", body);
    assert_eq!((again.status, again.code().as_str()), (409, "space_exists"));
    let junk = client.post("/v1/spaces", "Authorization: Bearer s3cret\r\n", "{");
    assert_eq!((junk.status, junk.code().as_str()), (400, "bad_request"));
    let path = format!("/api/segment/get/{made}");
    let first = client.get(&path, "").text();
    assert_eq!(first, "5");

    let health = client.get("/healthz", "");
    let text = health.text();
    assert_eq!(
        (health.status, text.lines().next()),
        (200, Some("ok")),
        "{text}"
    );
    let lease = format!("space \"{made}\": lease expires in ");
    assert!(text.contains(&lease), "{lease} missing from:\n{text}");
    let metrics = client.get("/metrics", "").text();
    for series in [
        format!("idspace_serve_ids_issued_total{{space=\"{orders}\"}} 151"),
        format!("idspace_serve_leases_total{{space=\"{orders}\"}}"),
        format!("idspace_serve_lease_wait_seconds_total{{space=\"{orders}\"}}"),
        format!("idspace_serve_step{{space=\"{orders}\"}}"),
        format!("idspace_serve_ids_left_current{{space=\"{orders}\"}}"),
        format!("idspace_serve_ids_left_next{{space=\"{orders}\"}}"),
        format!("idspace_serve_crash_gap_ids{{space=\"{orders}\"}} 0"),
        "idspace_serve_errors_total{code=\"bad_count\"} 5".to_string(),
        "idspace_serve_request_duration_seconds_bucket{le=\"+Inf\"}".to_string(),
        "idspace_serve_requests_total{route=\"segment\"}".to_string(),
    ] {
        assert!(
            metrics.contains(series.as_str()),
            "{series} missing from:\n{metrics}"
        );
    }
    let _ = std::fs::remove_file(token);
}

#[test]
fn routes_on_our_runtime() {
    within(Duration::from_secs(60), || routes("idspace"));
}

#[test]
fn routes_on_tokio() {
    within(Duration::from_secs(60), || routes("tokio"));
}

/// A client that shuts its sending side down right after its request (an HTTP/1.1 half-close)
/// still reads the answer, on both runtimes: the first request of a space (which waits for its
/// node to start) and a later one.
#[test]
fn a_half_closed_client_reads_its_answer() {
    within(Duration::from_secs(60), || {
        let url = shared_url();
        for runtime in ["idspace", "tokio"] {
            let space = format!("half-{runtime}");
            space_at(&url, &space, 1_000_000);
            let node = serve(&url, &["--runtime", runtime]);
            for _ in 0..2 {
                let mut stream = TcpStream::connect(node.address).unwrap();
                stream
                    .set_read_timeout(Some(Duration::from_secs(10)))
                    .unwrap();
                let request = format!("GET /v1/spaces/{space}/ids HTTP/1.1\r\nHost: t\r\n\r\n");
                stream.write_all(request.as_bytes()).unwrap();
                stream.shutdown(std::net::Shutdown::Write).unwrap();
                let mut answer = String::new();
                stream.read_to_string(&mut answer).unwrap();
                assert!(answer.starts_with("HTTP/1.1 200"), "{runtime}: {answer:?}");
                let id = answer.rsplit("\r\n\r\n").next().unwrap_or_default();
                assert!(
                    id.trim_end().parse::<u64>().is_ok(),
                    "{runtime}: {answer:?}"
                );
            }
        }
    });
}

/// Bad paths, huge counts, invalid UTF-8 in the path and a header flood get errors, never a
/// crash: the node answers normally afterwards. Admin routes are off without a token.
#[test]
fn malformed_requests_get_named_errors() {
    within(Duration::from_secs(60), || {
        let url = shared_url();
        space_at(&url, "m", 1_000_000);
        let mut node = serve(&url, &[]);
        let mut client = node.client();
        let missing = client.get("/nope/../../etc", "");
        assert_eq!(
            (missing.status, missing.code().as_str()),
            (404, "not_found")
        );
        let method = client.post("/api/segment/get/m", "", "");
        assert_eq!(
            (method.status, method.code().as_str()),
            (405, "method_not_allowed")
        );
        // A 405 says which methods the route takes (RFC 9110 15.5.6).
        assert_eq!(method.header("allow"), Some("GET"));
        let method = client.get("/v1/spaces", "");
        assert_eq!((method.status, method.header("allow")), (405, Some("POST")));
        let method = client.post("/healthz", "", "");
        assert_eq!(
            (method.status, method.header("allow")),
            (405, Some("GET, HEAD"))
        );
        // HEAD where GET only reads: GET's status and headers, no body; not where GET takes
        // IDs.
        let head = |path: &str| {
            let mut stream = TcpStream::connect(node.address).unwrap();
            let request = format!("HEAD {path} HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n");
            stream.write_all(request.as_bytes()).unwrap();
            let mut answer = String::new();
            stream.read_to_string(&mut answer).unwrap();
            answer
        };
        for path in ["/healthz", "/metrics"] {
            let answer = head(path);
            assert!(answer.starts_with("HTTP/1.1 200 "), "{answer}");
            assert!(answer.ends_with("\r\n\r\n"), "{answer}");
        }
        let answer = head("/api/segment/get/m");
        assert!(answer.starts_with("HTTP/1.1 405 "), "{answer}");
        let off = client.post("/v1/spaces", "Authorization: Bearer x\r\n", "{}");
        assert_eq!((off.status, off.code().as_str()), (404, "admin_disabled"));
        let huge = client.get(&format!("/v1/spaces/m/ids?count={}", u128::MAX), "");
        assert_eq!(huge.code(), "bad_count");
        // Percent-encoded bytes that are not UTF-8.
        let encoded = client.get("/api/segment/get/%FF%FE", "");
        assert_eq!(
            (encoded.status, encoded.code().as_str()),
            (400, "bad_request")
        );
        let long = client.get(&format!("/api/segment/get/{}", "a".repeat(300)), "");
        assert_eq!(long.status, 400);
        // Raw bytes that are not UTF-8 in the request line: refused by the HTTP parser.
        let mut raw = Client::connect(node.address);
        let answer = raw.raw(b"GET /api/segment/get/\xff\xfe HTTP/1.1\r\nHost: t\r\n\r\n");
        assert!(
            answer.as_ref().is_none_or(|r| r.status == 400),
            "{answer:?}"
        );
        // A header flood: too many headers, then one header too large.
        let mut flood = String::from("GET /api/segment/get/m HTTP/1.1\r\nHost: t\r\n");
        for i in 0..500 {
            flood.push_str(&format!("X-Flood-{i}: {}\r\n", "v".repeat(20)));
        }
        flood.push_str("\r\n");
        let answer = Client::connect(node.address).raw(flood.as_bytes());
        assert!(
            answer
                .as_ref()
                .is_none_or(|r| r.status == 431 || r.status == 400),
            "{answer:?}"
        );
        let big = format!(
            "GET /api/segment/get/m HTTP/1.1\r\nHost: t\r\nX-Big: {}\r\n\r\n",
            "v".repeat(200_000)
        );
        let answer = Client::connect(node.address).raw(big.as_bytes());
        assert!(
            answer
                .as_ref()
                .is_none_or(|r| r.status == 431 || r.status == 400),
            "{answer:?}"
        );
        // Still serving.
        assert_eq!(client.get("/api/segment/get/m", "").status, 200);
        // A name with a quote and a line break keeps to its one line of /healthz.
        space_at(&url, "m\"\n", 1_000);
        assert_eq!(client.get("/api/segment/get/m%22%0A", "").status, 200);
        let health = client.get("/healthz", "").text();
        assert!(
            health
                .lines()
                .skip(1)
                .all(|line| line.starts_with("space \"")),
            "{health}"
        );
        assert!(health.contains(r#"space "m\"\n": "#), "{health}");
        // And to its one line of the log at the stop.
        assert_eq!(node.stop(), Some(0));
        let line = r#"space "m\"\n": 1 IDs issued"#;
        assert!(node.logged_within(line, Duration::from_secs(5)), "{line}");
    });
}

/// A client reading its answer one byte a second holds only its own connection: others are
/// served meanwhile. Then many idle connections are held open, and the node still answers.
#[test]
fn a_slow_reader_and_many_idle_connections() {
    within(Duration::from_secs(60), || {
        let url = shared_url();
        space_at(&url, "s", u64::from(u32::MAX));
        let node = serve(&url, &[]);
        let mut slow = TcpStream::connect(node.address).unwrap();
        slow.write_all(b"GET /v1/spaces/s/ids?count=10000 HTTP/1.1\r\nHost: t\r\n\r\n")
            .unwrap();
        let mut client = node.client();
        let started = Instant::now();
        let mut byte = [0u8; 1];
        for _ in 0..3 {
            slow.read_exact(&mut byte).unwrap();
            let quick = Instant::now();
            assert_eq!(client.get("/api/segment/get/s", "").status, 200);
            assert!(quick.elapsed() < Duration::from_millis(500));
            std::thread::sleep(Duration::from_secs(1));
        }
        assert!(started.elapsed() >= Duration::from_secs(3));
        drop(slow);

        // Idle connections: 10,000, or as many as our descriptor limit allows with room to
        // spare (the node raises its own soft limit to the hard one).
        let (soft, _) = raise_own_limit();
        let wanted = 10_000.min(soft.saturating_sub(200) as usize);
        if wanted < 10_000 {
            eprintln!("idle connections: {wanted}, the most this process's limit ({soft}) allows");
        }
        let idle: Vec<TcpStream> = (0..wanted)
            .map(|_| TcpStream::connect(node.address).expect("an idle connection"))
            .collect();
        assert!(node.logged("open file limit"));
        let quick = Instant::now();
        let mut fresh = Client::connect(node.address);
        assert_eq!(fresh.get("/api/segment/get/s", "").status, 200);
        eprintln!(
            "{} idle connections; an answer beside them in {:?}",
            idle.len(),
            quick.elapsed()
        );
        let mut last = Client::connect(node.address);
        drop(idle);
        assert_eq!(last.get("/healthz", "").status, 200);
    });
}

/// Raises this test process's soft descriptor limit to the hard one; (soft, hard) after.
fn raise_own_limit() -> (u64, u64) {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit and setrlimit read and write the struct we own.
    unsafe {
        libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit);
        limit.rlim_cur = limit.rlim_max;
        libc::setrlimit(libc::RLIMIT_NOFILE, &limit);
        libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit);
    }
    (limit.rlim_cur, limit.rlim_max)
}

/// SIGTERM: requests in flight finish, the node exits 0 after parking its lease's tail, and
/// the next start of the same identity resumes from it (only the carved IDs are lost).
#[test]
fn a_graceful_stop_resumes_where_it_stopped() {
    within(Duration::from_secs(60), || {
        let url = shared_url();
        space_at(&url, "g", u64::from(u32::MAX));
        let flags = ["--node-id", "web-1", "--step", "100000"];
        let mut first = serve(&url, &flags);
        let mut client = first.client();
        let before: Vec<u64> = client
            .get("/v1/spaces/g/ids?count=1000", "")
            .text()
            .lines()
            .map(|l| l.parse().unwrap())
            .collect();
        let highest = *before.iter().max().unwrap();
        first.signal(libc::SIGTERM);
        assert_eq!(first.wait(Duration::from_secs(15)), Some(0));
        assert!(first.logged("parked for the next start"));
        let second = serve(&url, &flags);
        let after: u64 = second
            .client()
            .get("/api/segment/get/g", "")
            .text()
            .parse()
            .unwrap();
        // The lease of 100,000 was resumed: at most two CPUs' sub-ranges of 64 were lost.
        assert!(
            after > highest && after <= highest + 2 * 64 + 1,
            "{highest} then {after}"
        );
    });
}
