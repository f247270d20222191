//! The credential sources against a token endpoint on 127.0.0.1 ([`super::test_idp`]).

use std::path::PathBuf;

use jsonwebtoken::{encode, EncodingKey, Header};
use serde_json::json;

use super::test_idp::{self, Idp, Reply};
use super::*;

const SECRET: &str = "client-secret-0123456789";

fn settings(credentials: Option<UpstreamCredentials>) -> AgentSettings {
    let mut s = AgentSettings::plain("a".into(), "http://127.0.0.1:9/".parse().unwrap());
    s.credentials = credentials;
    s
}

fn build(s: &AgentSettings, clock: &Clock) -> Credentials {
    Credentials::with_clock(s, reqwest::Client::new(), test_idp::TIMEOUT, clock.clone())
}

fn oauth2(idp: &Idp) -> AgentSettings {
    let endpoint = idp.endpoint(test_idp::secret_auth("gw", SECRET));
    settings(Some(UpstreamCredentials::OAuth2(endpoint)))
}

fn exchange(idp: &Idp) -> AgentSettings {
    let endpoint = idp.endpoint(test_idp::secret_auth("gw", SECRET));
    settings(Some(UpstreamCredentials::TokenExchange(endpoint)))
}

async fn authorization(source: &Arc<dyn CallHeaders>) -> Result<String, String> {
    let map = source.headers().await?;
    Ok(map[AUTHORIZATION].to_str().unwrap().to_owned())
}

/// A caller's JWT for `sub`, expiring in `exp_in` seconds (its signature is not checked
/// here: inbound auth did that).
fn caller_jwt(sub: &str, exp_in: u64) -> Secret {
    let now = jsonwebtoken::get_current_timestamp();
    let claims = json!({"sub": sub, "exp": now + exp_in});
    let key = EncodingKey::from_secret(b"caller-signing-key-of-32-bytes!!");
    encode(&Header::default(), &claims, &key)
        .unwrap()
        .parse()
        .unwrap()
}

fn temp_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("gw-creds-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

#[tokio::test]
async fn oauth2_one_token_for_every_call_until_refresh_ahead() {
    let idp = Idp::start().await;
    idp.set(Reply::Token(Some(120)));
    let clock = Clock::default();
    let creds = build(&oauth2(&idp), &clock);
    assert_eq!(creds.kind(), Some("oauth2"));
    assert!(creds.for_caller(None).is_none(), "not a caller kind");
    let source = creds.for_agent().unwrap();
    for _ in 0..10 {
        assert_eq!(authorization(&source).await.unwrap(), "Bearer token-1");
    }
    assert_eq!(idp.count(), 1);
    // 120 s tokens refresh 60 s ahead: at 59 s the old one, at 60 s a new one.
    clock.advance(Duration::from_secs(59));
    assert_eq!(authorization(&source).await.unwrap(), "Bearer token-1");
    clock.advance(Duration::from_secs(1));
    assert_eq!(authorization(&source).await.unwrap(), "Bearer token-2");
    assert_eq!(idp.count(), 2);
    let seen = &idp.requests()[1];
    assert_eq!(seen.form["grant_type"], "client_credentials");
    assert_eq!(seen.basic.as_ref().unwrap().1, SECRET);
}

#[tokio::test]
async fn oauth2_fifty_concurrent_calls_make_one_token_request() {
    let idp = Idp::start().await;
    let creds = build(&oauth2(&idp), &Clock::default());
    let source = creds.for_agent().unwrap();
    idp.hold();
    let calls: Vec<_> = (0..50)
        .map(|_| {
            let source = source.clone();
            tokio::spawn(async move { authorization(&source).await })
        })
        .collect();
    idp.arrived(1).await;
    // One thread: every call has asked by the time the endpoint saw the first request.
    tokio::task::yield_now().await;
    idp.release();
    for call in calls {
        assert_eq!(call.await.unwrap().unwrap(), "Bearer token-1");
    }
    assert_eq!(idp.count(), 1);
}

#[tokio::test]
async fn oauth2_an_outage_fails_fast_for_a_backoff_then_recovers() {
    let idp = Idp::start().await;
    let clock = Clock::default();
    let creds = build(&oauth2(&idp), &clock);
    let source = creds.for_agent().unwrap();
    idp.set(Reply::Status(503, format!("down; {SECRET}")));
    for _ in 0..20 {
        let e = authorization(&source).await.unwrap_err();
        assert_eq!(e, "the token endpoint refused the request (HTTP 503)");
    }
    assert_eq!(
        idp.count(),
        1,
        "within the backoff the failure is remembered"
    );
    idp.set(Reply::Token(Some(3600)));
    assert!(
        authorization(&source).await.is_err(),
        "still within the backoff"
    );
    clock.advance(cache::FAILURE_BACKOFF);
    assert_eq!(authorization(&source).await.unwrap(), "Bearer token-2");
}

#[tokio::test]
async fn oauth2_a_refused_token_is_replaced_once() {
    let idp = Idp::start().await;
    let creds = build(&oauth2(&idp), &Clock::default());
    let source = creds.for_agent().unwrap();
    let sent = source.headers().await.unwrap();
    source.refused(&sent);
    assert_eq!(authorization(&source).await.unwrap(), "Bearer token-2");
    // A late refusal of the old token keeps the new one.
    source.refused(&sent);
    assert_eq!(authorization(&source).await.unwrap(), "Bearer token-2");
    assert_eq!(idp.count(), 2);
}

#[tokio::test]
async fn token_exchange_per_caller_cached_by_caller_token() {
    let idp = Idp::start().await;
    let creds = build(&exchange(&idp), &Clock::default());
    assert!(
        creds.for_agent().is_none(),
        "nothing for calls without a caller"
    );
    let (alice, bob) = (caller_jwt("alice", 600), caller_jwt("bob", 600));
    let as_alice = creds.for_caller(Some(&alice)).unwrap();
    let as_bob = creds.for_caller(Some(&bob)).unwrap();
    assert_eq!(authorization(&as_alice).await.unwrap(), "Bearer token-1");
    assert_eq!(authorization(&as_bob).await.unwrap(), "Bearer token-2");
    // The next request of the same caller token: from the cache.
    let again = creds.for_caller(Some(&alice)).unwrap();
    assert_eq!(authorization(&again).await.unwrap(), "Bearer token-1");
    let subjects: Vec<String> = idp
        .requests()
        .iter()
        .map(|r| r.form["subject_token"].clone())
        .collect();
    assert_eq!(subjects, [alice.expose(), bob.expose()]);
    // A refusal of alice's token replaces it, bob's stays.
    let sent = as_alice.headers().await.unwrap();
    as_alice.refused(&sent);
    assert_eq!(authorization(&as_alice).await.unwrap(), "Bearer token-3");
    assert_eq!(authorization(&as_bob).await.unwrap(), "Bearer token-2");
    // The cache holds digests, never the tokens.
    let shown = format!("{creds:?} {as_alice:?}");
    assert!(
        !shown.contains(alice.expose()) && !shown.contains("token-1"),
        "{shown}"
    );
}

#[tokio::test]
async fn token_exchange_never_outlives_the_callers_token() {
    let idp = Idp::start().await;
    let clock = Clock::default();
    let creds = build(&exchange(&idp), &clock);
    // The endpoint says an hour; the caller's JWT expires in 100 s.
    let short = caller_jwt("carol", 100);
    let source = creds.for_caller(Some(&short)).unwrap();
    assert_eq!(authorization(&source).await.unwrap(), "Bearer token-1");
    clock.advance(Duration::from_secs(49));
    assert_eq!(authorization(&source).await.unwrap(), "Bearer token-1");
    clock.advance(Duration::from_secs(2));
    assert_eq!(authorization(&source).await.unwrap(), "Bearer token-2");
}

#[tokio::test]
async fn caller_kinds_without_the_callers_jwt_send_nothing() {
    let idp = Idp::start().await;
    for s in [
        exchange(&idp),
        settings(Some(UpstreamCredentials::ForwardCallerToken)),
    ] {
        let creds = build(&s, &Clock::default());
        let e = creds.for_caller(None).unwrap().headers().await.unwrap_err();
        assert!(e.contains("needs the caller's JWT"), "{e}");
    }
    assert_eq!(idp.count(), 0);
    let creds = build(
        &settings(Some(UpstreamCredentials::ForwardCallerToken)),
        &Clock::default(),
    );
    let token = caller_jwt("dave", 60);
    let source = creds.for_caller(Some(&token)).unwrap();
    let sent = source.headers().await.unwrap();
    assert_eq!(
        sent[AUTHORIZATION],
        format!("Bearer {}", token.expose()).as_str()
    );
    assert!(sent[AUTHORIZATION].is_sensitive());
    assert!(!format!("{source:?}").contains(token.expose()));
}

#[tokio::test]
async fn bearer_and_header_files_are_read_again_when_they_change() {
    let dir = temp_dir("rotate");
    let (token, tenant) = (dir.join("token"), dir.join("tenant"));
    std::fs::write(&token, "first-token\n").unwrap();
    std::fs::write(&tenant, "t-1").unwrap();
    let mut s = settings(Some(UpstreamCredentials::Bearer(ValueSource::File(
        token.clone(),
    ))));
    let name = HeaderName::from_static("x-tenant");
    s.headers
        .insert(name.clone(), HeaderValue::from_static("t-1"));
    s.header_files.push((name.clone(), tenant.clone()));
    let creds = build(&s, &Clock::default());
    let source = creds.for_agent().unwrap();
    let sent = source.headers().await.unwrap();
    assert_eq!(sent[AUTHORIZATION], "Bearer first-token");
    assert_eq!(sent[&name], "t-1");
    std::fs::write(&token, "second-token-longer").unwrap();
    std::fs::write(&tenant, "t-22").unwrap();
    let sent = source.headers().await.unwrap();
    assert_eq!(sent[AUTHORIZATION], "Bearer second-token-longer");
    assert_eq!(sent[&name], "t-22");
    // A refusal: both are read again on the next call, changed or not.
    let agent = creds.agent.as_ref().unwrap();
    let Some(AgentAuth::File(bearer_file)) = &agent.auth else {
        panic!("a bearer file")
    };
    assert!(!bearer_file.will_reread() && !agent.files[0].1.will_reread());
    source.refused(&sent);
    assert!(bearer_file.will_reread() && agent.files[0].1.will_reread());
    // Unreadable for a moment: the last value serves.
    std::fs::remove_file(&token).unwrap();
    assert_eq!(
        source.headers().await.unwrap()[AUTHORIZATION],
        "Bearer second-token-longer"
    );
    assert!(!format!("{creds:?}").contains("second-token"));
    let _ = std::fs::remove_dir_all(dir);
}

#[tokio::test]
async fn a_fixed_bearer_is_sent_as_is() {
    let s = settings(Some(UpstreamCredentials::Bearer(ValueSource::Fixed(
        "fixed-bearer-value".parse().unwrap(),
    ))));
    let creds = build(&s, &Clock::default());
    let source = creds.for_agent().unwrap();
    assert_eq!(
        authorization(&source).await.unwrap(),
        "Bearer fixed-bearer-value"
    );
    assert!(!format!("{creds:?}").contains("fixed-bearer-value"));
    assert!(build(&settings(None), &Clock::default())
        .for_agent()
        .is_none());
}

#[tokio::test]
async fn a_caller_source_carries_the_agents_file_headers() {
    let dir = temp_dir("caller-files");
    let tenant = dir.join("tenant");
    std::fs::write(&tenant, "t-9").unwrap();
    let mut s = settings(Some(UpstreamCredentials::ForwardCallerToken));
    let name = HeaderName::from_static("x-tenant");
    s.header_files.push((name.clone(), tenant));
    let creds = build(&s, &Clock::default());
    let token = caller_jwt("erin", 60);
    let sent = creds
        .for_caller(Some(&token))
        .unwrap()
        .headers()
        .await
        .unwrap();
    assert_eq!(sent[&name], "t-9");
    assert!(sent.contains_key(AUTHORIZATION));
    let _ = std::fs::remove_dir_all(dir);
}
