module contextstore/generators/atari_state

// atari builds with Go 1.25; this line gives the encoder the same GODEBUG defaults.
go 1.25
