-- open(k, fv, b, load, nmin, parts): the spread index's cfg (KEYS[1], the
-- crawl's dedupe cfg) made by the first worker, atomically; every worker
-- gets the index's fields back and uses its layout. An index made in the
-- one-tag layout (k and no parts) is returned as it is: the worker refuses it
-- (index.py ONE_TAG: crawlproject dedupe migrate).
if redis.call('HEXISTS', KEYS[1], 'k') == 0 then
  redis.call('HSET', KEYS[1], 'k', ARGV[1], 'fv', ARGV[2], 'b', ARGV[3], 'load', ARGV[4],
    'nmin', ARGV[5], 'parts', ARGV[6])
end
return redis.call('HMGET', KEYS[1], 'k', 'fv', 'b', 'load', 'nmin', 'parts')
