//! An agent's TLS configuration at run time (docs/security.md#upstream-trust). (Being built.)
