//! kbot-server (skeleton; being built).
