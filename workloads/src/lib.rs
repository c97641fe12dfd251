//! kbot-bench (skeleton; being built).
