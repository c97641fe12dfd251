pub mod seed;
