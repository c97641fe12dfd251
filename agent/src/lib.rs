//! kbot-agent (skeleton; being built).
