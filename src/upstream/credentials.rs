//! An agent's credentials at run time (docs/security.md#upstream-credentials). (Being built.)
