//! Edges call the store over cleartext HTTP/2 or keep-alive HTTP/1.1; both
//! are served on the one port.

use crate::common::{charge, hit, Service};
use ankusa_testkit::redis::Redis;
use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn answers_cleartext_http2_with_prior_knowledge() {
    let redis = Redis::start();
    let service = Service::ready(&redis.url()).await;
    let client = Client::builder(TokioExecutor::new())
        .http2_only(true)
        .build_http::<Full<Bytes>>();
    let body = hit(vec![charge("hooks", "h2", 1, 1_000, 1_000)], None).to_string();
    for _ in 0..3 {
        let req = hyper::Request::post(service.at("/v1/hit"))
            .body(Full::new(Bytes::from(body.clone())))
            .expect("request");
        let res = client.request(req).await.expect("h2c answer");
        assert_eq!(res.version(), hyper::Version::HTTP_2);
        assert_eq!(res.status(), 200);
        let text = res.into_body().collect().await.expect("body").to_bytes();
        let answer: serde_json::Value = serde_json::from_slice(&text).expect("JSON");
        assert_eq!(answer["result"], "ok", "{answer}");
        assert_eq!(
            answer["levels"].as_array().map(Vec::len),
            Some(1),
            "{answer}"
        );
    }
    service.stop().await;
}
