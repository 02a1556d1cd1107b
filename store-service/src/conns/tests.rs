use super::*;

fn registry(limit: usize) -> Arc<Conns> {
    Conns::new(limit, Arc::new(Metrics::new()))
}

fn closing(conn: &Conn) -> Option<Close> {
    match conn.close.load(Ordering::SeqCst) {
        NOW => Some(Close::Now),
        GRACEFULLY => Some(Close::Gracefully),
        _ => None,
    }
}

#[test]
fn below_the_limit_every_connection_is_admitted_and_counted() {
    let conns = registry(3);
    let held: Vec<_> = (0..3).map(|_| conns.admit().expect("room")).collect();
    assert_eq!(conns.open(), 3);
    assert!(held.iter().all(|r| closing(r.conn()).is_none()));
    drop(held);
    assert_eq!(conns.open(), 0);
}

#[test]
fn at_the_limit_the_oldest_unauthenticated_connection_makes_room() {
    let conns = registry(3);
    let edge = conns.admit().expect("room");
    edge.conn().authenticate();
    let first = conns.admit().expect("room");
    let second = conns.admit().expect("room");
    let third = conns.admit().expect("room made");
    assert_eq!(
        closing(first.conn()),
        Some(Close::Now),
        "the oldest without a token"
    );
    assert_eq!(closing(edge.conn()), None, "an authenticated one is kept");
    assert_eq!(closing(second.conn()), None);
    assert_eq!(conns.open(), 3);
    // Given back twice (shed, then its task ends): counted once.
    drop(first);
    assert_eq!(conns.open(), 3);
    drop((second, third));
    assert_eq!(conns.open(), 1);
}

#[test]
fn an_idle_unauthenticated_connection_goes_before_a_busy_older_one() {
    let conns = registry(2);
    let busy = conns.admit().expect("room");
    let _request = busy.conn().begin();
    let idle = conns.admit().expect("room");
    let _new = conns.admit().expect("room made");
    assert_eq!(closing(idle.conn()), Some(Close::Now));
    assert_eq!(closing(busy.conn()), None);
}

#[test]
fn with_every_connection_authenticated_the_longest_idle_closes_gracefully() {
    let conns = registry(3);
    let held: Vec<_> = (0..3).map(|_| conns.admit().expect("room")).collect();
    for r in &held {
        r.conn().authenticate();
    }
    // The first is busy; of the idle two, the second went idle first.
    let _busy = held[0].conn().begin();
    drop(held[2].conn().begin());
    let _new = conns.admit().expect("room made");
    assert_eq!(closing(held[1].conn()), Some(Close::Gracefully));
    assert_eq!(closing(held[0].conn()), None);
    assert_eq!(closing(held[2].conn()), None);
}

#[test]
fn with_every_connection_authenticated_and_busy_a_new_one_is_refused() {
    let conns = registry(2);
    let held: Vec<_> = (0..2).map(|_| conns.admit().expect("room")).collect();
    let _requests: Vec<_> = held
        .iter()
        .map(|r| {
            r.conn().authenticate();
            r.conn().begin()
        })
        .collect();
    assert!(conns.admit().is_none());
    assert_eq!(conns.open(), 2);
    let refused = conns
        .metrics
        .connections_closed
        .with_label_values(&["limit_refused"])
        .get();
    assert_eq!(refused, 1);
}

#[test]
fn the_gauges_follow_authentication_and_closes() {
    let conns = registry(4);
    let gauge = |state: &str| conns.metrics.connections.with_label_values(&[state]).get();
    let a = conns.admit().expect("room");
    let b = conns.admit().expect("room");
    assert_eq!((gauge("authenticated"), gauge("unauthenticated")), (0, 2));
    a.conn().authenticate();
    a.conn().authenticate();
    assert_eq!((gauge("authenticated"), gauge("unauthenticated")), (1, 1));
    drop(b);
    drop(a);
    assert_eq!((gauge("authenticated"), gauge("unauthenticated")), (0, 0));
}

#[tokio::test]
async fn a_connection_is_idle_only_with_no_request_in_flight() {
    let conns = registry(2);
    let r = conns.admit().expect("room");
    let request = r.conn().begin();
    let timeout = Duration::from_millis(50);
    let idle = r.idle_for(timeout);
    tokio::pin!(idle);
    // Busy for three timeouts: not idle, however long.
    tokio::select! {
        () = &mut idle => panic!("idle while a request is in flight"),
        () = tokio::time::sleep(timeout * 3) => {}
    }
    let done = Instant::now();
    drop(request);
    idle.await;
    // Counted from the end of the request, not from when it was accepted.
    assert!(done.elapsed() >= timeout, "{:?}", done.elapsed());
}

#[tokio::test]
async fn asked_resolves_with_how() {
    let conns = registry(1);
    let first = conns.admit().expect("room");
    let _second = conns.admit().expect("room made");
    assert_eq!(first.asked().await, Close::Now);
}
