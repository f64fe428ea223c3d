// The API reference: Swagger UI over the contract this server embeds
// (/docs/openapi.json, its server set to this server). In development the
// page is signed in with the development token, so "Try it out" works at
// once; otherwise use "Authorize" with a bearer token.
(function () {
  var config = JSON.parse(document.getElementById("uploadedfile-docs").textContent);
  var ui = SwaggerUIBundle({
    url: "/docs/openapi.json",
    dom_id: "#reference",
    deepLinking: true,
    tryItOutEnabled: false,
    onComplete: function () {
      if (config.token) ui.preauthorizeApiKey("bearer", config.token);
    },
  });
  window.ui = ui;
})();
