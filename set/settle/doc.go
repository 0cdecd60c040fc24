// Package settle moves a SET's money to the wallet after its commits: the
// Settler delivers the outbox (credits to openers, refunds to senders) at
// least once, which the ledger's unique keys make exactly once, closes
// expired packets and refunds their rest, and decides sends a crash left
// undecided. hbsettler runs one per SET, and beside it the webhook
// deliverer (package set/webhooks) when webhooks are configured.
package settle
