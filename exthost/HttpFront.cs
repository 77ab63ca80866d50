using System.Text;
using Microsoft.AspNetCore.Builder;
using Microsoft.AspNetCore.Http;
using Microsoft.AspNetCore.Routing;
using Microsoft.Azure.WebJobs;
using Microsoft.Azure.WebJobs.Host.Config;
using Microsoft.Extensions.Logging;
using Newtonsoft.Json.Linq;

namespace ExtHost;

/// <summary>
/// The HTTP front: the app's HTTP functions under the route prefix (ASP.NET Core route templates,
/// as the Functions host uses), each call run through the WebJobs host (JobHost.CallAsync, so input
/// and output bindings go through the real extensions); the Durable extension's webhooks at
/// /runtime/webhooks/durabletask (its own HTTP API handler); /admin/host/ping. Function keys as the
/// Functions host enforces them (FunctionKeys): each route at its function's authLevel, the webhooks
/// at the system level (the `durabletask_extension` key or the master key); refused: 401, empty body.
/// </summary>
public static class HttpFront
{
    public const string WebhookPath = "/runtime/webhooks/durabletask";

    public static void Map(IEndpointRouteBuilder endpoints, string routePrefix, IEnumerable<WorkerFunction> httpFunctions, FunctionKeys keys, Func<IJobHost> jobHost, Func<IAsyncConverter<HttpRequestMessage, HttpResponseMessage>> durableWebhooks, ILogger logger)
    {
        endpoints.MapGet("/admin/host/ping", () => Results.Ok());
        endpoints.Map(WebhookPath + "/{**rest}", async ctx =>
        {
            if (!keys.AuthorizeSystem(FunctionKeys.DurableSystemKeyName, FunctionKeys.Presented(ctx.Request)))
            {
                ctx.Response.StatusCode = 401;
                return;
            }
            using var request = await ToRequestMessage(ctx);
            using var response = await durableWebhooks().ConvertAsync(request, ctx.RequestAborted);
            await WriteResponseMessage(ctx, response);
        });
        foreach (var fn in httpFunctions)
        {
            var trigger = fn.Bindings[fn.TriggerName];
            string route = trigger.Value<string>("route") ?? fn.Name;
            string pattern = "/" + string.Join('/', new[] { routePrefix.Trim('/'), route.Trim('/') }.Where(p => p != ""));
            var methods = (trigger["methods"] as JArray)?.Select(m => m.ToString().ToUpperInvariant()).ToArray();
            string level = FunctionKeys.LevelOf(trigger.Value<string>("authLevel"));
            RequestDelegate handler = ctx =>
            {
                if (keys.Authorize(level, fn.Name, FunctionKeys.Presented(ctx.Request))) return Invoke(ctx, fn, jobHost(), logger);
                ctx.Response.StatusCode = 401;
                return Task.CompletedTask;
            };
            if (methods is { Length: > 0 }) endpoints.MapMethods(pattern, methods, handler);
            else endpoints.Map(pattern, handler);
        }
    }

    static async Task Invoke(HttpContext ctx, WorkerFunction fn, IJobHost jobHost, ILogger logger)
    {
        using var body = new MemoryStream();
        await ctx.Request.Body.CopyToAsync(body, ctx.RequestAborted);
        var headers = new JObject();
        foreach (var (key, value) in ctx.Request.Headers) headers[key.ToLowerInvariant()] = string.Join(", ", value.ToArray());
        var query = new JObject();
        foreach (var (key, value) in ctx.Request.Query) query[key] = string.Join(",", value.ToArray());
        var routeParams = new JObject();
        foreach (var (key, value) in ctx.Request.RouteValues) if (value is not null) routeParams[key] = value.ToString();
        var call = new HttpCall
        {
            Request = new JObject
            {
                ["method"] = ctx.Request.Method,
                ["url"] = $"{ctx.Request.Scheme}://{ctx.Request.Host}{ctx.Request.PathBase}{ctx.Request.Path}{ctx.Request.QueryString}",
                ["headers"] = headers,
                ["query"] = query,
                ["params"] = routeParams,
                ["body"] = new JObject { ["$base64"] = Convert.ToBase64String(body.ToArray()) },
            },
        };
        try
        {
            await jobHost.CallAsync(fn.Name, new Dictionary<string, object?> { ["call"] = call }, ctx.RequestAborted);
        }
        catch (Exception e)
        {
            logger.LogError("HTTP function {Function} failed: {Message}", fn.Name, (e.InnerException ?? e).Message);
            ctx.Response.StatusCode = 500;
            return;
        }
        var response = call.Response;
        if (response is null)
        {
            ctx.Response.StatusCode = 204;
            return;
        }
        ctx.Response.StatusCode = response.Value<int?>("status") ?? 200;
        if (response["headers"] is JObject outHeaders)
            foreach (var (key, value) in outHeaders) ctx.Response.Headers[key] = value?.ToString();
        if (response["cookies"] is JArray cookies && cookies.Count > 0)
            ctx.Response.Headers.SetCookie = cookies.Select(c => c.ToString()).ToArray();
        var bytes = response["body"] is JObject b && b.Value<string>("$base64") is string base64 ? Convert.FromBase64String(base64)
            : response["body"] is JValue { Type: JTokenType.String } s ? Encoding.UTF8.GetBytes(s.ToString()) : [];
        if (ctx.Response.StatusCode is not (204 or 304) && !HttpMethods.IsHead(ctx.Request.Method))
        {
            ctx.Response.ContentLength = bytes.Length;
            await ctx.Response.Body.WriteAsync(bytes, ctx.RequestAborted);
        }
    }

    static async Task<HttpRequestMessage> ToRequestMessage(HttpContext ctx)
    {
        var uri = new Uri($"{ctx.Request.Scheme}://{ctx.Request.Host}{ctx.Request.PathBase}{ctx.Request.Path}{ctx.Request.QueryString}");
        var message = new HttpRequestMessage(new HttpMethod(ctx.Request.Method), uri);
        using var body = new MemoryStream();
        await ctx.Request.Body.CopyToAsync(body, ctx.RequestAborted);
        message.Content = new ByteArrayContent(body.ToArray());
        foreach (var (key, value) in ctx.Request.Headers)
        {
            if (!message.Headers.TryAddWithoutValidation(key, value.ToArray())) message.Content.Headers.TryAddWithoutValidation(key, value.ToArray());
        }
        return message;
    }

    static async Task WriteResponseMessage(HttpContext ctx, HttpResponseMessage response)
    {
        ctx.Response.StatusCode = (int)response.StatusCode;
        foreach (var (key, value) in response.Headers) ctx.Response.Headers[key] = value.ToArray();
        if (response.Content is null) return;
        foreach (var (key, value) in response.Content.Headers) ctx.Response.Headers[key] = value.ToArray();
        ctx.Response.Headers.Remove("transfer-encoding");
        await response.Content.CopyToAsync(ctx.Response.Body);
    }
}

/// <summary>
/// The webhook base URL the Durable extension hands out (the Functions host's IWebHookProvider role):
/// with keys on it carries the system key as `code`, as the Functions host's does, so the management
/// URLs the extension builds from it are authorized.
/// </summary>
public sealed class LocalWebHookProvider(Func<Uri> baseUrl, string? systemKey) : IWebHookProvider
{
    public Uri GetUrl(IExtensionConfigProvider extension)
    {
        var url = new UriBuilder(new Uri(baseUrl(), HttpFront.WebhookPath));
        if (systemKey is not null) url.Query = "code=" + Uri.EscapeDataString(systemKey);
        return url.Uri;
    }
}
