-- Remove persistent consumer ARGV[3] (its subscription was deleted);
-- unknown ones are ignored.
redis.call('DEL', conkey(ARGV[3]))
unindex_consumer(ARGV[3])
return 0
