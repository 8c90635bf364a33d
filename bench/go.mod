module github.com/stormguard/stormguard/bench

go 1.26.0

require (
	github.com/avast/retry-go/v4 v4.7.0
	github.com/aws/aws-sdk-go-v2 v1.48.0
	github.com/cenkalti/backoff/v5 v5.0.3
	github.com/failsafe-go/failsafe-go v0.9.8
	github.com/sethvargo/go-retry v0.5.0
	github.com/sony/gobreaker/v2 v2.4.0
	github.com/stormguard/stormguard v0.0.0
)

require (
	github.com/aws/smithy-go v1.28.9 // indirect
	github.com/bits-and-blooms/bitset v1.24.4 // indirect
	github.com/influxdata/tdigest v0.0.1 // indirect
)

replace github.com/stormguard/stormguard => ../
