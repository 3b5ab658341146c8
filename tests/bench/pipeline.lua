-- wrk script: send DEPTH (default 16) requests for the URL's path in one
-- write; wrk counts every response. Usage: wrk -s pipeline.lua URL -- 16
init = function(args)
  local depth = tonumber(args[1]) or 16
  local r = {}
  for i = 1, depth do
    r[i] = wrk.format(nil, wrk.path)
  end
  req = table.concat(r)
end

request = function()
  return req
end
