-- A lease's holder is the login's email as the store keeps it (dav_provider.app.OneName); leases
-- taken before were held by the email as the client's Basic header spelt it ("ADA@EXAMPLE.COM"),
-- which the same person, named as stored now, could no longer unlock or write under until it
-- expired. Each such holder becomes the stored email.
UPDATE path_leases l
   SET data = jsonb_set(l.data, '{principal}', to_jsonb(u.email))
  FROM users u
 WHERE lower(l.data->>'principal') = lower(u.email)
   AND l.data->>'principal' <> u.email;
