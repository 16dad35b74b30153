-- Remove persistent consumer ARGV[3] (its subscription was deleted, or
-- moved to another subscriber); unknown ones are ignored. One subscribed
-- again since (a forget retried after its reply was lost, or one that
-- ran after a new subscription of the same consumer) is a new consumer,
-- and stays.
if subscribed(ARGV[3]) then return 0 end
redis.call('DEL', conkey(ARGV[3]))
unindex_consumer(ARGV[3])
return 0
